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
//! - Memory: the text report ([`report::build_files`]) and the diff ([`diff::compare_files`]) read
//!   dumps one stack at a time and keep what they add up: a peak resident size of 2.2 and 2.7
//!   times a 55 MB dump of a million stacks (`diff` of it against itself), 2.4 and 2.7 times its
//!   79 MB symbolized variant; `tests/memory.rs` holds them to 3× (plus the binary's own few
//!   megabytes) on half a million stacks. Folded stacks, flame graphs and pprof output resolve
//!   whole dumps first: 10 to 14 times their size.
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

use jeprof_dumpfmt::read::{ReadOptions, Truncation};
use rayon::prelude::*;

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
    let read = jeprof_dumpfmt::read::read_file_with(path, &policy.options)?;
    if let Some(truncation) = &read.truncation {
        (policy.on_truncated)(path, truncation);
    }
    Ok(read.profile)
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
) -> Result<ResolvedProfile, jeprof_dumpfmt::Error> {
    let profile = jeprof_dumpfmt::read::parse(bytes)?;
    Ok(resolve(profile, source, options))
}

/// Reads, parses and resolves a dump file. Errors name the file (and the line, for broken lines).
pub fn load(
    path: &Path,
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> Result<ResolvedProfile, jeprof_dumpfmt::Error> {
    let profile = read_dump(path, policy)?;
    Ok(resolve(profile, &path.display().to_string(), options))
}

/// Reads, parses and resolves several dumps, in parallel, keeping their order.
pub fn load_all(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Vec<ResolvedProfile>, jeprof_dumpfmt::Error> {
    paths.par_iter().map(|p| load(p, options, policy)).collect()
}

/// Parses dumps in parallel, each with where it came from (for messages); the first failure in
/// `paths` order is the error.
pub fn parse_all(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<Vec<(jeprof_dumpfmt::Profile, String)>, jeprof_dumpfmt::Error> {
    paths
        .par_iter()
        .map(|p| Ok((read_dump(p, policy)?, p.display().to_string())))
        .collect()
}

/// Dumps per unit of work in [`merge_files`]: small enough that no worker idles long at the end,
/// large enough that starting an accumulator per unit (and adding it in) costs little.
const MERGE_CHUNK: usize = 16;

/// Merges dump files. The dumps are cut into chunks of 16 consecutive dumps; `jobs` workers each
/// take the next chunk in turn (a shared counter, so no worker idles while another still has a
/// queue) and fold its dumps, one at a time and in order, into the chunk's own figures
/// ([`Accumulator::add_dump`]; names, frames and the symbol cache stay with the worker from chunk to
/// chunk); the chunks' figures are added to the result in chunk order as they complete. So figures
/// are summed in the same order whatever `jobs` and the timing (the result is reproducible bit for
/// bit), and memory holds the result plus a few chunks' figures, whatever the number of dumps.
/// `on_dump` is called after each dump is folded in (for a progress bar). On errors, the error of
/// the first failing dump in `paths` order is returned.
pub fn merge_files(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
    jobs: usize,
    on_dump: &(dyn Fn() + Sync),
) -> Result<Accumulator, jeprof_dumpfmt::Error> {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// The result so far: chunks `..next` added, later ones waiting for their turn.
    struct Reduced {
        total: Accumulator,
        next: usize,
        waiting: BTreeMap<usize, Accumulator>,
    }

    let chunks = paths.len().div_ceil(MERGE_CHUNK);
    let next_chunk = AtomicUsize::new(0);
    // Dumps at or after the first failure are not started: every earlier one already was (chunks
    // are handed out in order, dumps read in order), so the failure reported is the first in
    // `paths` order.
    let stop = AtomicUsize::new(usize::MAX);
    let first_error: Mutex<Option<(usize, jeprof_dumpfmt::Error)>> = Mutex::new(None);
    let reduced = Mutex::new(Reduced {
        total: Accumulator::new(),
        next: 0,
        waiting: BTreeMap::new(),
    });
    let worker = || {
        // Names, frames and the symbol cache carry over from chunk to chunk; figures do not.
        let mut acc = Accumulator::new();
        loop {
            let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks {
                return;
            }
            let first = chunk * MERGE_CHUNK;
            for (i, path) in paths.iter().enumerate().skip(first).take(MERGE_CHUNK) {
                if i >= stop.load(Ordering::Relaxed) {
                    return;
                }
                match read_dump(path, policy) {
                    Ok(profile) => {
                        acc.add_dump(profile, &path.display().to_string(), options);
                        on_dump();
                    }
                    Err(e) => {
                        stop.fetch_min(i, Ordering::Relaxed);
                        let mut first = first_error.lock().unwrap_or_else(|p| p.into_inner());
                        if first.as_ref().is_none_or(|(j, _)| i < *j) {
                            *first = Some((i, e));
                        }
                        return;
                    }
                }
            }
            let part = acc.split_off();
            let mut r = reduced.lock().unwrap_or_else(|p| p.into_inner());
            r.waiting.insert(chunk, part);
            loop {
                let at = r.next;
                let Some(part) = r.waiting.remove(&at) else {
                    break;
                };
                r.total.absorb(part);
                r.next += 1;
            }
        }
    };
    let workers = jobs.clamp(1, chunks.max(1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (1..workers).map(|_| scope.spawn(worker)).collect();
        worker();
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    if let Some((_, e)) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(reduced
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .total)
}
