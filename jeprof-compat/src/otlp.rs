//! OpenTelemetry profiles from dumps: the pprof message [`crate::pprof`] builds (names, frames
//! removed, flat charged, dumps added up), re-indexed as an OTLP `ExportProfilesServiceRequest` by
//! [`jeprof_dumpfmt::otlp::from_pprof`]. The figures per stack are therefore pprof's, and every
//! pprof option (`--hide`, `--show_from`, `--label`, `--binary`) means the same here.
//!
//! Each dump's labels name its process: the request has one resource per distinct set of them
//! (`service.name`, `host.name`, `process.pid`, `process.executable.name`,
//! `process.executable.build_id.gnu`, and the other labels under their own keys), each with one
//! profile per sample type, over one shared dictionary.

use std::path::PathBuf;

pub use jeprof_dumpfmt::otlp::{decode, encode, ExportProfilesServiceRequest};
use jeprof_dumpfmt::otlp::{from_pprof, InstrumentationScope};

use crate::input::ReadPolicy;
use crate::pprof::{self, PprofOptions};

/// The instrumentation scope the requests name: this crate and its version.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "jeprof-compat".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        ..InstrumentationScope::default()
    }
}

/// Reads dump files and builds their OTLP request, as [`pprof::build_files`] builds their pprof
/// message (the same options, the same figures). Errors name the file and line.
pub fn build_files(
    paths: &[PathBuf],
    symbolize: &crate::symbolize::SymbolizeOptions,
    options: &PprofOptions,
    policy: &ReadPolicy<'_>,
) -> Result<ExportProfilesServiceRequest, crate::error::Error> {
    let pb = pprof::build_files(paths, symbolize, options, policy)?;
    Ok(from_pprof(&pb, &scope()))
}
