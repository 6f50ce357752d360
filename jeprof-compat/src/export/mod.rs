//! Dumps as rows any SQL engine adds up correctly (`jeprof-compat export`): one row per stack of
//! each dump, with its frames, the dump's identity and labels, and figures *already unbiased*, so
//! that a plain `SUM` over rows of any dumps (any periods, processes, builds) is the fleet's
//! estimate, and a `SUM` of the variance columns its variance (`docs/design.md` §2, §13).
//!
//! - [`rows`]: a dump's identity and rows, independent of any storage;
//! - [`parquet`]: schema v1 as Arrow record batches, written to Parquet.
//!
//! [`export_files`] reads the dumps on a few worker threads, each holding one dump (read whole,
//! entries with the same frames added up, resolved), and hands their rows through a bounded
//! channel to the one writer, which writes them in input order, so the file is the same whatever
//! the number of workers. The output is written atomically: on any error (a dump that does not
//! read, a failed write) no file is left at the output path.
//!
//! ## Guarantees
//! - For every dump, the rows' figures add up to exactly the figures `merge` adds for it: the
//!   reader's per-entry estimates, summed (entries of one stack added in dump order). The
//!   per-function sums over rows (`GROUP BY user_frame`, or `leaf`) are what `report` charges flat
//!   to on the merged dump, where the dumps carry symbols; unnamed frames are named by address in
//!   `frames` and by `file+0xoffset` in `locations`, which is what `merge` merges them by.
//! - Per-thread rows ([`RowOptions::per_thread`]) add up to the per-thread lines' figures, which
//!   are *not* the stack's: jemalloc's per-thread lines are unbiased each with its own average
//!   size, and `E[n]/p(avg)` is not additive over a split of the samples (see §13). So they come
//!   only on request, and a query adding them gets the per-thread estimate, not `merge`'s.

pub mod parquet;
pub mod rows;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex};

pub use rows::{DumpIdentity, DumpRows, RowOptions, RowRss, StackRow};

use crate::binary;
use crate::error::Error;
use crate::input::{read_dump, ReadPolicy};
use crate::symbolize::{resolve, SymbolizeOptions};

/// Choices for [`export_files`].
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// How frames are named (raw dumps through their binaries, `--binary`).
    pub symbolize: SymbolizeOptions,
    /// Which rows are made.
    pub rows: RowOptions,
    /// Labels added to every dump's (`--label k=v`), replacing a dump's label of the same key.
    pub labels: Vec<(String, String)>,
    /// Dumps read at once (at least 1).
    pub jobs: usize,
}

/// What [`export_files`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSummary {
    /// Dumps read.
    pub dumps: usize,
    /// Rows written.
    pub rows: u64,
}

/// Checks a `--label` given as `key=value` and splits it.
pub fn parse_label(text: &str) -> Result<(String, String), Error> {
    let bad = |reason: &str| Error::Label {
        label: text.to_string(),
        reason: reason.to_string(),
    };
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| bad("expected KEY=VALUE"))?;
    if let Some(problem) = jeprof_dumpfmt::labels::key_problem(key)
        .or_else(|| jeprof_dumpfmt::labels::value_problem(value))
    {
        return Err(bad(problem));
    }
    Ok((key.to_string(), value.to_string()))
}

/// One dump read and made into rows.
pub fn dump_rows(
    path: &Path,
    options: &ExportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<DumpRows, Error> {
    let mut profile = read_dump(path, policy)?;
    binary::check(&profile, path, options.symbolize.binary.as_ref())?;
    let rss = jeprof_dumpfmt::rss::RssFigures::from_annotations(&profile.annotations)
        .map_err(|e| e.in_file(path))?;
    let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let identity = rows::identity(&profile, path, mtime, &options.labels);
    // Entries with the same frames are one stack (jeprof and merge add them up).
    profile.coalesce();
    let threads: Vec<_> = profile
        .stacks
        .iter_mut()
        .map(|s| std::mem::take(&mut s.threads))
        .collect();
    let resolved = resolve(profile, &identity.dump, &options.symbolize);
    let mut rows = rows::rows(&resolved, &threads, &options.rows);
    if let Some(rss) = &rss {
        rows::attach_rss(&mut rows, rss);
    }
    Ok(DumpRows { identity, rows })
}

/// Reads `paths` (in parallel, `options.jobs` at a time) and writes their rows, in input order,
/// to the Parquet file `out`, atomically: on error nothing is written there. `progress` is called
/// once per dump written. The first error in input order is returned.
pub fn export_files(
    paths: &[PathBuf],
    out: &Path,
    options: &ExportOptions,
    policy: &ReadPolicy<'_>,
    progress: &(dyn Fn() + Sync),
) -> Result<ExportSummary, Error> {
    let mut summary = ExportSummary {
        dumps: paths.len(),
        rows: 0,
    };
    jeprof_dumpfmt::output::write_atomically(out, |file| {
        let fail = |e: ::parquet::errors::ParquetError| Error::Output {
            path: out.to_path_buf(),
            reason: e.to_string(),
        };
        let mut sink = parquet::ParquetSink::new(file).map_err(fail)?;
        for_each_in_order(paths, options, policy, |dump| {
            sink.write(&dump).map_err(fail)?;
            progress();
            Ok(())
        })?;
        summary.rows = sink.finish().map_err(fail)?;
        Ok(())
    })
    .map_err(|e: ExportError| e.0)?;
    Ok(summary)
}

/// `write_atomically` needs an error that a dump error converts into; ours is [`Error`].
struct ExportError(Error);

impl From<Error> for ExportError {
    fn from(e: Error) -> ExportError {
        ExportError(e)
    }
}

impl From<jeprof_dumpfmt::Error> for ExportError {
    fn from(e: jeprof_dumpfmt::Error) -> ExportError {
        ExportError(Error::Dump(e))
    }
}

/// Reads the dumps on `options.jobs` workers and hands each one's rows to `write` in input order.
///
/// Memory: a worker takes dump `i` only once dump `i − 2·jobs` has been written, so at most
/// `2·jobs` dumps' rows exist at once (being read, waiting in the channel, or waiting for an
/// earlier dump), however many dumps there are.
fn for_each_in_order(
    paths: &[PathBuf],
    options: &ExportOptions,
    policy: &ReadPolicy<'_>,
    mut write: impl FnMut(DumpRows) -> Result<(), Error>,
) -> Result<(), Error> {
    let jobs = options.jobs.clamp(1, paths.len().max(1));
    let window = 2 * jobs;
    let next_claim = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // The number of dumps written so far, and its change signalled to waiting workers.
    let written = (Mutex::new(0usize), Condvar::new());
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<DumpRows, Error>)>(jobs);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (next_claim, stop, written) = (&next_claim, &stop, &written);
            scope.spawn(move || loop {
                // Ordering: the counter only hands out distinct indexes; what workers share is
                // behind the mutex and the channel.
                let i = next_claim.fetch_add(1, Ordering::Relaxed);
                if i >= paths.len() {
                    return;
                }
                {
                    let mut done = written.0.lock().unwrap_or_else(|e| e.into_inner());
                    // Ordering: `stop` is set before the writer notifies under this lock.
                    while i >= *done + window && !stop.load(Ordering::Relaxed) {
                        done = written.1.wait(done).unwrap_or_else(|e| e.into_inner());
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let rows = dump_rows(&paths[i], options, policy);
                if tx.send((i, rows)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut pending = std::collections::BTreeMap::new();
        let mut next = 0;
        let result = (|| {
            for (i, rows) in &rx {
                pending.insert(i, rows);
                while let Some(rows) = pending.remove(&next) {
                    write(rows?)?;
                    next += 1;
                    let (lock, changed) = &written;
                    *lock.lock().unwrap_or_else(|e| e.into_inner()) = next;
                    changed.notify_all();
                }
            }
            Ok(())
        })();
        if result.is_err() {
            // Ordering: set under the lock the workers wait on, so none misses the wake-up.
            let (lock, changed) = &written;
            let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
            stop.store(true, Ordering::Relaxed);
            changed.notify_all();
        }
        // Unblocks workers waiting to send; they stop at their next claim.
        drop(rx);
        result
    })
}
