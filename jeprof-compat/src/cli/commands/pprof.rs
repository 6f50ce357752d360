//! `pprof`: the dumps added up, as a gzipped profile.proto.

use jeprof_compat::pprof;

use crate::cli::defs::PprofArgs;
use crate::cli::output::write_output;

/// Takes jeprof's form `pprof PROGRAM DUMP...` as well.
pub(crate) fn run(mut args: PprofArgs) -> anyhow::Result<()> {
    args.common.take_program(&mut args.dumps)?;
    let options = args.pprof_options()?;
    let pb = pprof::build_files(
        &args.dumps,
        &args.common.symbolize_own()?,
        &options,
        &args.common.read_policy(),
    )?;
    write_output(&args.output, |out| Ok(pprof::write_gz(&pb, out)?))
}
