//! `symbolize`: a raw dump written again with the names of its frames.

use jeprof_compat::named_dump;
use jeprof_dumpfmt::WriteOptions;

use crate::cli::defs::SymbolizeArgs;

/// Takes jeprof's form `symbolize PROGRAM DUMP` as well; one dump.
pub(crate) fn run(mut args: SymbolizeArgs) -> anyhow::Result<()> {
    args.common.take_program(&mut args.dumps)?;
    let [dump] = args.dumps.as_slice() else {
        anyhow::bail!(
            "symbolize takes one dump, {} given (symbolize each, or merge them first)",
            args.dumps.len()
        );
    };
    if args.common.jeprof_names || args.common.keep_alloc_frames {
        anyhow::bail!(
            "symbolize writes every name whole: --jeprof_names and --keep_alloc_frames are for \
             the reports that read its output"
        );
    }
    let profile =
        named_dump::symbolize_file(dump, &args.common.symbolize()?, &args.common.read_policy())?;
    jeprof_dumpfmt::write::write_file(&profile, &args.output, &WriteOptions::default())?;
    Ok(())
}
