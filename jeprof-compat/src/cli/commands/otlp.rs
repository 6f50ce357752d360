//! `otlp`: the dumps added up, as an OpenTelemetry `ExportProfilesServiceRequest` (protobuf).

use std::io::Write;

use jeprof_compat::otlp;

use crate::cli::defs::PprofArgs;
use crate::cli::output::write_output;

/// Takes jeprof's form `otlp PROGRAM DUMP...` as `pprof` does.
pub(crate) fn run(mut args: PprofArgs) -> anyhow::Result<()> {
    args.common.take_program(&mut args.dumps)?;
    let options = args.pprof_options()?;
    let request = otlp::build_files(
        &args.dumps,
        &args.common.symbolize_own()?,
        &options,
        &args.common.read_policy(),
    )?;
    write_output(&args.output, |out| {
        Ok(out.write_all(&otlp::encode(&request))?)
    })
}
