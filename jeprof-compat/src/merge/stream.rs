//! The streaming merge: dumps read as their names come, folded in by workers a chunk at a time,
//! the chunks added to the result in input order (so the result is the same whatever the number
//! of workers and the timing).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use super::accumulator::{Accumulator, Partial, Translation};
use crate::binary;
use crate::error::Error;
use crate::input::{read_dump, ReadPolicy};
use crate::symbolize::SymbolizeOptions;

/// Dumps per unit of work in [`merge_stream`]: small enough that no worker idles long at the end,
/// large enough that handing a unit over (and adding it in) costs little.
const MERGE_CHUNK: usize = 16;

/// Merges dump files: [`merge_stream`] over a list held in memory.
pub fn merge_files(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
    jobs: usize,
    on_dump: &(dyn Fn() + Sync),
) -> Result<Accumulator, Error> {
    merge_stream(
        paths.iter().cloned().map(Ok),
        options,
        policy,
        jobs,
        on_dump,
    )
}

/// Keeps the failure of the earliest dump (in input order).
fn note_error(first_error: &mut Option<(usize, Error)>, i: usize, e: Error) {
    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
        *first_error = Some((i, e));
    }
}

/// What a worker of [`merge_stream`] hands back for one chunk.
enum Done {
    Chunk(usize, Partial),
    /// The chunk's dump at this index (in input order) failed; the chunk's figures are dropped.
    Failed(usize, usize, Error),
    /// The worker panicked (a bug: input never makes the library panic); re-raised by the caller.
    Panicked(Box<dyn std::any::Any + Send>),
}

/// Merges the dumps `inputs` names, reading the names as it goes: memory holds the result (its
/// distinct stacks, names and frames), each worker's tables of the same, one dump in flight per
/// worker and at most `2 × jobs` chunks' figures, whatever the number of dumps. An error from
/// `inputs` (a list that cannot be read) counts as the failure of the dump at its place.
///
/// How: the calling thread reads `inputs`, cuts them into chunks of 16 consecutive dumps and hands
/// the chunks, in order, through a bounded channel to `jobs` workers (never more than `2 × jobs`
/// chunks handed out and not yet added in). A worker folds its chunk's dumps one at a time and in
/// order into the chunk's own figures ([`Accumulator::add_dump`]; names, frames and the symbol cache
/// stay with the worker from chunk to chunk, and a chunk carries only the ones new since that
/// worker's previous chunk), then sends them back; the calling thread adds the chunks to the result
/// in chunk order. So figures are summed in the same order whatever `jobs` and the timing: the
/// result is reproducible bit for bit, and the same as [`merge_files`] on the same list.
/// `on_dump` is called after each dump is folded in (for a progress bar). On errors, the error of
/// the first failing dump in input order is returned.
pub fn merge_stream<I>(
    inputs: I,
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
    jobs: usize,
    on_dump: &(dyn Fn() + Sync),
) -> Result<Accumulator, Error>
where
    I: IntoIterator<Item = Result<PathBuf, Error>>,
{
    let workers = jobs.max(1);
    // Chunks handed out and not yet added in: each worker's current one and one waiting for it.
    let window = 2 * workers;
    let (work_tx, work_rx) = mpsc::sync_channel::<Work>(window);
    let (done_tx, done_rx) = mpsc::sync_channel::<Done>(window);
    let shared = Shared {
        work: Mutex::new(work_rx),
        stop: AtomicUsize::new(usize::MAX),
        options,
        policy,
        on_dump,
    };
    std::thread::scope(|scope| {
        for w in 0..workers {
            let done_tx = done_tx.clone();
            let shared = &shared;
            scope.spawn(move || run_worker(shared, w, done_tx));
        }
        drop(done_tx);
        let mut inputs = inputs.into_iter();
        let mut reduce = Reduce::new(workers);
        loop {
            reduce.hand_out(&mut inputs, &work_tx, window);
            if reduce.added == reduce.sent {
                break;
            }
            match done_rx.recv() {
                Ok(done) => reduce.take_back(done),
                // Every worker is gone with chunks outstanding: only a panic does that, and the
                // scope re-raises it.
                Err(_) => break,
            }
        }
        drop(work_tx);
        match reduce.first_error {
            Some((_, e)) => Err(e),
            None => Ok(reduce.total),
        }
    })
}

/// One chunk of work: its number, the input index of its first dump, and its dumps.
type Work = (usize, usize, Vec<PathBuf>);

/// What [`merge_stream`]'s workers share: the chunks to take, and the input index at and after
/// which dumps are not started (the first failure seen: every earlier dump already was, since
/// chunks are handed out and dumps read in order, so the failure reported is the first in input
/// order).
struct Shared<'a> {
    work: Mutex<mpsc::Receiver<Work>>,
    stop: AtomicUsize,
    options: &'a SymbolizeOptions,
    policy: &'a ReadPolicy<'a>,
    on_dump: &'a (dyn Fn() + Sync),
}

/// A worker: takes chunks until none is left, folds each into its own accumulator and sends the
/// chunk's figures back (a chunk cut short by a failure too: the caller counts every chunk back,
/// and adds none after a failure). A panic is sent back for the caller to re-raise.
fn run_worker(shared: &Shared<'_>, worker: usize, done_tx: mpsc::SyncSender<Done>) {
    let mut acc = Accumulator::new();
    let work = || loop {
        let next = shared.work.lock().unwrap_or_else(|p| p.into_inner()).recv();
        // The sender is gone: every chunk was handed out.
        let Ok((chunk, first, paths)) = next else {
            return;
        };
        let failed = fold_chunk(shared, &mut acc, first, &paths);
        let partial = acc.take_partial(worker);
        let done = match failed {
            Some((i, e)) => Done::Failed(chunk, i, e),
            None => Done::Chunk(chunk, partial),
        };
        if done_tx.send(done).is_err() {
            return;
        }
    };
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        let _ = done_tx.send(Done::Panicked(panic));
    }
}

/// Folds a chunk's dumps (the first at input index `first`) into `acc` in order; the index and
/// error of the dump that failed, if one did (the dumps after it are not read).
fn fold_chunk(
    shared: &Shared<'_>,
    acc: &mut Accumulator,
    first: usize,
    paths: &[PathBuf],
) -> Option<(usize, Error)> {
    for (i, path) in (first..).zip(paths) {
        // Ordering: a hint to stop early, paired with nothing; the error itself goes back
        // through the channel.
        if i >= shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let read = read_dump(path, shared.policy)
            .map_err(Error::from)
            .and_then(|profile| {
                binary::check(&profile, path, shared.options.binary.as_ref())?;
                Ok(profile)
            });
        match read {
            Ok(profile) => {
                acc.add_dump(profile, shared.options);
                (shared.on_dump)();
            }
            Err(e) => {
                // Ordering: as the load above.
                shared.stop.fetch_min(i, Ordering::Relaxed);
                return Some((i, e));
            }
        }
    }
    None
}

/// The calling thread's side of [`merge_stream`]: chunks handed out (`sent`), added in
/// (`added`), and back but waiting for their turn (`None`: failed), and the result.
struct Reduce {
    total: Accumulator,
    translations: Vec<Translation>,
    first_error: Option<(usize, Error)>,
    sent: usize,
    added: usize,
    waiting: BTreeMap<usize, Option<Partial>>,
    next_dump: usize,
    exhausted: bool,
}

impl Reduce {
    fn new(workers: usize) -> Reduce {
        Reduce {
            total: Accumulator::new(),
            translations: (0..workers).map(|_| Translation::default()).collect(),
            first_error: None,
            sent: 0,
            added: 0,
            waiting: BTreeMap::new(),
            next_dump: 0,
            exhausted: false,
        }
    }

    /// Reads dump names from `inputs` and hands them out in chunks while fewer than `window`
    /// chunks are out (so the send never blocks), until the inputs end or one fails.
    fn hand_out<I>(&mut self, inputs: &mut I, work_tx: &mpsc::SyncSender<Work>, window: usize)
    where
        I: Iterator<Item = Result<PathBuf, Error>>,
    {
        while !self.exhausted && self.first_error.is_none() && self.sent - self.added < window {
            let first = self.next_dump;
            let mut paths = Vec::with_capacity(MERGE_CHUNK);
            while paths.len() < MERGE_CHUNK {
                match inputs.next() {
                    Some(Ok(path)) => paths.push(path),
                    Some(Err(e)) => {
                        note_error(&mut self.first_error, first + paths.len(), e);
                        self.exhausted = true;
                        break;
                    }
                    None => {
                        self.exhausted = true;
                        break;
                    }
                }
            }
            self.next_dump += paths.len();
            if paths.is_empty() {
                break;
            }
            if work_tx.send((self.sent, first, paths)).is_err() {
                break;
            }
            self.sent += 1;
        }
    }

    /// Takes a chunk back from a worker, then adds every chunk whose turn has come, in chunk
    /// order (none after a failure).
    fn take_back(&mut self, done: Done) {
        match done {
            Done::Chunk(chunk, partial) => {
                self.waiting.insert(chunk, Some(partial));
            }
            Done::Failed(chunk, i, e) => {
                note_error(&mut self.first_error, i, e);
                self.waiting.insert(chunk, None);
            }
            Done::Panicked(panic) => std::panic::resume_unwind(panic),
        }
        while let Some(partial) = self.waiting.remove(&self.added) {
            if let (Some(partial), None) = (partial, &self.first_error) {
                let translation = &mut self.translations[partial.worker];
                self.total.absorb_partial(translation, partial);
            }
            self.added += 1;
        }
    }
}
