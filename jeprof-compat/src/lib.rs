//! # jeprof-compat: jeprof's reports without Perl, a fleet merge that unbiases before it sums
//!
//! A library (and the `jeprof-compat` binary over it) for jemalloc `heap_v2` heap profiles:
//!
//! - [`report`]: jeprof's `--text` report with the same numbers as the Perl script (same per-entry
//!   unbiasing, allocator frames removed the same way, recursion counted once per stack, same sort
//!   and formatting), folded stacks (`--collapsed`) and flame graphs (inferno), and per-function 95%
//!   confidence intervals;
//! - [`merge`]: any number of dumps, from different processes (addresses normalised to module +
//!   file offset through each dump's memory map), different builds (merged by function name where
//!   symbols exist) and different sample periods, added up after each is unbiased;
//! - [`pprof`]: `profile.proto` output;
//! - [`diff`]: per-function change between two sets of dumps, with its interval.
//!
//! ```
//! use jeprof_compat::{load_bytes, report, symbolize::SymbolizeOptions};
//!
//! let dump = "--- symbol\nbinary=prog\n0x40113f leaf_alloc\n0x401149 main\n---\n--- heap\n\
//!             heap_v2/524288\n  t*: 1: 262144 [0: 0]\n@ 0x40113f 0x40114a\n  t*: 1: 262144 [0: 0]\n";
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
//! - Several symbolized dumps are symbolized each with its own symbol section (jeprof merges the
//!   sections, the last file winning an address), so dumps of different builds stay right.
//! - Not reproduced: `--thread`, `--base` (see `diff`), `--lines`/`--addresses`/`--files`
//!   granularity, jeprof's `Callback::Run` renaming and its nm `<address>` disambiguation of
//!   overloaded short names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod diff;
pub mod fuzzing;
pub mod hash;
pub mod maps;
pub mod merge;
pub mod names;
pub mod pprof;
pub mod report;
pub mod symbolize;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use merge::Accumulator;
pub use symbolize::{resolve, ResolvedProfile, SymbolizeOptions};

/// Parses and resolves a dump held in memory.
pub fn load_bytes(
    bytes: &[u8],
    source: &str,
    options: &SymbolizeOptions,
) -> Result<ResolvedProfile, jeprof_dumpfmt::Error> {
    let profile = jeprof_dumpfmt::read::parse(bytes)?;
    Ok(resolve(profile, source, options))
}

/// Reads, parses and resolves a dump file. Errors name the file (and the line, for broken lines).
pub fn load(
    path: &Path,
    options: &SymbolizeOptions,
) -> Result<ResolvedProfile, jeprof_dumpfmt::Error> {
    let profile = jeprof_dumpfmt::read::read_file(path)?;
    Ok(resolve(profile, &path.display().to_string(), options))
}

/// Reads, parses and resolves several dumps, in parallel, keeping their order.
pub fn load_all(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
) -> Result<Vec<ResolvedProfile>, jeprof_dumpfmt::Error> {
    paths.par_iter().map(|p| load(p, options)).collect()
}

/// Merges dump files: each worker parses one dump at a time and folds it into its own
/// [`Accumulator`], which are then added together; at most one dump per worker is in memory at once.
/// `on_dump` is called after each dump is folded in (for a progress bar).
pub fn merge_files(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
    jobs: usize,
    on_dump: &(dyn Fn() + Sync),
) -> Result<Accumulator, jeprof_dumpfmt::Error> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .map_err(|e| jeprof_dumpfmt::Error::Io {
            file: None,
            source: std::io::Error::other(e),
        })?;
    let min_len = (paths.len() / (4 * jobs.max(1))).max(1);
    pool.install(|| {
        paths
            .par_iter()
            .with_min_len(min_len)
            .try_fold(Accumulator::new, |mut acc, path| {
                let profile = load(path, options)?;
                acc.add(&profile);
                on_dump();
                Ok(acc)
            })
            .try_reduce(Accumulator::new, |mut a, b| {
                a.absorb(b);
                Ok(a)
            })
    })
}
