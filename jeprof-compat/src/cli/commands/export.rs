//! `export`: the dumps as rows of unbiased figures, in a Parquet file.

use jeprof_compat::export;

use crate::cli::defs::ExportArgs;
use crate::cli::options::per_process;
use crate::cli::output::Progress;

/// Takes jeprof's form `export PROGRAM DUMP...` as well.
pub(crate) fn run(mut args: ExportArgs) -> anyhow::Result<()> {
    args.common.take_program(&mut args.dumps)?;
    per_process(
        &mut args.dumps,
        args.latest_per_process,
        jeprof_compat::input::repeated_process_rows_warning,
    )?;
    let options = args.export_options()?;
    let progress = Progress::of(args.dumps.len());
    let result = export::export_files(
        &args.dumps,
        &args.output,
        &options,
        &args.common.read_policy(),
        &|| progress.tick(),
    );
    progress.finish();
    result?;
    Ok(())
}
