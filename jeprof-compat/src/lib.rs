//! # jeprof-compat: jeprof's reports without Perl, a fleet merge that unbiases before it sums
//!
//! A library (and the `jeprof-compat` binary, a thin command line over it) for jemalloc `heap_v2`
//! heap profiles. The binary parses arguments and prints; what it reads, how, and what it computes
//! are decided here.
//!
//! ## Modules
//! - [`report`]: jeprof's `--text` report with the same numbers as the Perl script (same per-entry
//!   unbiasing, allocator frames removed the same way, recursion counted once per stack, same sort
//!   and formatting; [`report::build_files`] folds dump files as they are read), folded stacks
//!   (`--collapsed`, [`report::collapsed_files`]) and flame graphs (inferno), and per-function 95%
//!   confidence intervals;
//! - [`merge`]: any number of dumps, from different processes (addresses normalised to module +
//!   file offset through each dump's memory map), different builds (merged by function name where
//!   symbols exist) and different sample periods, added up after each is unbiased
//!   ([`merge::merge_stream`] over any number of dumps, read as they come), and how the result's figures become integers
//!   ([`merge::OutputRounding`]);
//! - [`pprof`]: `profile.proto` output;
//! - [`scopes`]: reports of one scope, and per-scope totals, from dumps that carry scopes;
//! - [`diff`]: per-function change between two dumps, with its interval
//!   ([`diff::compare_files`]);
//! - [`export`]: dumps as rows of unbiased figures (schema v1, Parquet), which any SQL engine
//!   adds up correctly ([`export::export_files`]); `query` (cargo feature `sql`): SQL over those
//!   rows in-process, with named views by function, leaf, label and hour and their intervals;
//! - [`views`]: jeprof's `--base`, `--drop_negative`, `--thread` ([`views::base`]) and `--ignore`,
//!   `--retain`, `--exclude` ([`views::filters`]), `--lines` ([`views::lines`]);
//! - [`attribution`]: which function a stack's figure is charged to (`--hide`, `--show_from`; by
//!   default the first that is not Rust's standard library's or the allocator's), [`binary`]:
//!   `--binary` checked against the dumps, and jeprof's `PROGRAM DUMP...` form;
//! - [`symbolize`]: names for a dump's addresses (its symbol section, else the binaries its memory
//!   map names), [`names`]: demangling, jeprof's name shortening and its skip lists, [`maps`]: the
//!   memory map;
//! - here: [`ReadPolicy`] (strict or accepting cut dumps), [`read_dump`] and the `load*` helpers
//!   that read and resolve whole dumps.
//!
//! ## Errors
//! Every fallible function returns [`Error`], whose text names the file (and the line) at fault,
//! except [`read_dump`] and [`read_dump_stacks`]: they are [`jeprof_dumpfmt::read`] under a
//! [`ReadPolicy`], and return its [`jeprof_dumpfmt::Error`] (which [`Error::Dump`] wraps).
//! Functions that can fail only as the caller's [`std::io::Write`] fails return
//! [`std::io::Result`], as that writer does.
//!
//! ## Example
//! ```
//! use jeprof_compat::{load_bytes, report, symbolize::SymbolizeOptions};
//!
//! let dump = "--- symbol\nbinary=prog\n0x40113f leaf_alloc\n0x401149 main\n---\n--- heap\n\
//!             heap_v2/524288\n  t*: 1: 262144 [0: 0]\n@ 0x40113f 0x40114a\n  t*: 1: 262144 [0: 0]\n\
//!             MAPPED_LIBRARIES:\n";
//! let profile = load_bytes(dump.as_bytes(), "dump", &SymbolizeOptions::default()).unwrap();
//! let options = report::ReportOptions { show_bytes: true, ..Default::default() };
//! let text = report::format_text(&report::build(&[profile], &options), &options);
//! assert_eq!(text.lines().next(), Some("Total: 666237 B"));
//! assert!(text.contains("666237 100.0% 100.0%   666237 100.0% leaf_alloc"));
//! ```
//!
//! ## Guarantees and limits
//! - Figures are the `f64` sums of what jeprof computes per entry ([`jeprof_dumpfmt::read`]); jeprof
//!   adds the same numbers in a random (Perl hash) order, so a figure within a rounding step of a
//!   printed boundary may differ by one unit in the last printed digit between jeprof runs, and from
//!   ours.
//! - Names: Rust symbols are demangled cleanly ([`names::NameStyle::Clean`]) where jeprof mangles
//!   them (`<A as B>::alloc` becomes `::alloc`); [`names::NameStyle::Jeprof`] reproduces jeprof's
//!   names. Rust allocator shims are removed too unless asked not to ([`names::SkipRules`]).
//! - Charging: [`report::ReportOptions::attribution`] defaults to jeprof's (the leaf); the
//!   command line's own mode uses [`attribution::Attribution::user_code`], and
//!   `--jeprof_names --keep_alloc_frames` gives jeprof's report byte for byte (goldens).
//! - Memory: the text report ([`report::build_files`]) and the diff ([`diff::compare_files`]) read
//!   dumps one stack at a time and keep what they add up, never a dump's stacks: `tests/memory.rs`
//!   holds their peak resident size to 3 times the dump's size (plus the binary's own few
//!   megabytes) on half a million stacks. A merge ([`merge::merge_stream`]) holds its result plus a
//!   few chunks of dumps' figures and one dump per worker, whatever the number of dumps (the list
//!   of dumps is read as it goes): `tests/merge_memory.rs` holds 4 times as many dumps to the same
//!   peak. Folded stacks, flame graphs,
//!   pprof output and the views of [`views`] (`--base`, `--thread`, `--callgrind`, `--list`,
//!   `--dot`, fetched profiles) resolve whole dumps first, and take a multiple of their size.
//! - A merge is reproducible bit for bit, whatever the number of workers.
//! - Several symbolized dumps are symbolized each with its own symbol section (jeprof merges the
//!   sections, the last file winning an address), so dumps of different builds stay right.
//! - Input never makes the library panic: the fuzz targets (`fuzz/`) and `tests/fuzz_corpus.rs`
//!   hold it to that.
//! - Not reproduced: `--addresses`/`--files` granularity, binutils' ` (discriminator N)`
//!   suffixes at `--lines` and `--list` ([`views::lines`]), `--list` of shared libraries,
//!   jeprof's SVG rewriting for its web viewer, jeprof's `Callback::Run` renaming and its nm `<address>` disambiguation of
//!   overloaded short names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod attribution;
pub mod binary;
pub mod diff;
mod error;
pub mod export;
// Public only for the fuzz crate (`fuzz/`, a separate package) and `tests/fuzz_corpus.rs`, which
// run its bodies; not part of the API.
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod hash;
pub use jeprof_dumpfmt::maps;
pub mod merge;
pub mod names;
pub mod pprof;
#[cfg(feature = "sql")]
pub mod query;
pub mod report;
pub mod scopes;
pub mod symbolize;
pub mod views;

use std::path::{Path, PathBuf};

use jeprof_dumpfmt::read::{ReadOptions, Truncation};
use rayon::prelude::*;

pub use error::Error;
pub use merge::Accumulator;
pub use symbolize::{resolve, ResolvedProfile, SymbolizeOptions};

/// How dump files are read: whether a dump that was cut while being written is accepted, and who
/// hears what was lost from one.
#[derive(Clone, Copy)]
pub struct ReadPolicy<'a> {
    /// The reader's options ([`ReadOptions::allow_truncated`]).
    pub options: ReadOptions,
    /// Told about every dump read although it was cut (only with `allow_truncated`).
    pub on_truncated: &'a (dyn Fn(&Path, &Truncation) + Sync),
}

impl Default for ReadPolicy<'static> {
    /// Strict: a cut dump is an error.
    fn default() -> ReadPolicy<'static> {
        ReadPolicy {
            options: ReadOptions::default(),
            on_truncated: &|_, _| {},
        }
    }
}

/// Reads one dump file under `policy` ([`jeprof_dumpfmt::read::read_file_with`]: regular files
/// only, streamed, errors naming the file and line).
pub fn read_dump(
    path: &Path,
    policy: &ReadPolicy<'_>,
) -> Result<jeprof_dumpfmt::Profile, jeprof_dumpfmt::Error> {
    let mut stacks = Vec::new();
    let mut profile = read_dump_stacks(path, policy, |_, stack| stacks.push(stack))?;
    profile.stacks = stacks;
    Ok(profile)
}

/// Reads one dump file under `policy` as [`read_dump`] does, handing each stack to `on_stack`
/// instead of keeping it ([`jeprof_dumpfmt::read::read_file_stacks_with`]): memory holds what
/// `on_stack` keeps, never the dump's stacks. The profile returned has no stacks.
pub fn read_dump_stacks(
    path: &Path,
    policy: &ReadPolicy<'_>,
    on_stack: impl FnMut(&jeprof_dumpfmt::Profile, jeprof_dumpfmt::Stack),
) -> Result<jeprof_dumpfmt::Profile, jeprof_dumpfmt::Error> {
    let read = jeprof_dumpfmt::read::read_file_stacks_with(path, &policy.options, on_stack)?;
    if let Some(truncation) = &read.truncation {
        (policy.on_truncated)(path, truncation);
    }
    Ok(read.profile)
}

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

/// Parses dumps in parallel, each with where it came from (for messages); the first failure in
/// `paths` order is the error.
pub fn parse_all(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<Vec<(jeprof_dumpfmt::Profile, String)>, Error> {
    paths
        .par_iter()
        .map(|p| Ok((read_dump(p, policy)?, p.display().to_string())))
        .collect()
}
