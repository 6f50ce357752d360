//! Whole dumps, read ([`crate::input`]), checked against `--binary` ([`crate::binary`]) and named
//! ([`crate::symbolize::resolve`]): what the views that need every stack's frames take. The text
//! report, the diff and the merge read dumps as they go instead
//! ([`crate::input::read_dump_stacks`]).

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::binary;
use crate::error::Error;
use crate::input::{read_dump, ReadPolicy};
use crate::symbolize::{resolve, ResolvedProfile, SymbolizeOptions};

/// Parses and resolves a dump held in memory.
pub fn load_bytes(
    bytes: &[u8],
    source: &str,
    options: &SymbolizeOptions,
) -> Result<ResolvedProfile, Error> {
    let profile = jeprof_dumpfmt::read::parse(bytes)?;
    Ok(resolve(profile, source, options))
}

/// Reads, parses and resolves a dump file. Errors name the file (and the line, for broken lines).
pub fn load(
    path: &Path,
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> Result<ResolvedProfile, Error> {
    let profile = read_dump(path, policy)?;
    binary::check(&profile, path, options.binary.as_ref())?;
    Ok(resolve(profile, &path.display().to_string(), options))
}

/// Reads, parses and resolves several dumps, in parallel, keeping their order.
pub fn load_all(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Vec<ResolvedProfile>, Error> {
    paths.par_iter().map(|p| load(p, options, policy)).collect()
}
