//! Sequenced dumps, jemalloc's way: `<prefix>.<pid>.<seq>.<kind><kseq>.heap` (and
//! `<prefix>.<pid>.<seq>.f.heap` for the final one), where `seq` counts every sequenced dump of
//! the process from 0 and `kseq` the dumps of that kind (jemalloc's `prof_dump_filename`). Interval
//! (`i`) and peak (`u`) dumps are written by a background writer thread, near-limit (`l`) ones by
//! the memory-limit watcher (`near_limit`); manual (`m`, [`crate::dump_next`]) and final (`f`,
//! `dump_final`) ones by the calling or exiting thread.
//!
//! The writer is started outside any allocation ([`ensure_writer`]: from `configure`,
//! [`crate::dump_next`], before `main` when `JEPROF_SHIM` asks for automatic dumps, and in a
//! forked child), and sleeps on a futex that the sampled path wakes ([`triggers::request`]). It
//! runs inside the re-entrancy guard for its whole life: nothing it allocates is sampled, so its
//! dumps never trigger dumps. A dump copies the tables under their locks (allocating threads wait
//! at most that long), then symbolizes and writes with no profiler lock held.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use jeprof_dumpfmt::{Profile, Stack};

use super::peak::PEAK;
use super::report;
use super::setting_values;
use crate::base::settings::{self, DEFAULT_DUMP_PREFIX};
use crate::base::sync::lock;
use crate::base::thread::{self, Guard};
use crate::parts::stacks::STACKS;
use crate::parts::triggers;

/// What a sequenced dump holds and why it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `dump_interval` bytes were allocated (`i`).
    Interval,
    /// A new peak (`u`, jemalloc's gdump letter): the peak tracker's snapshot.
    Peak,
    /// [`crate::dump_next`] (`m`).
    Manual,
    /// The process's memory use reached `dump_near_limit` of its cgroup's limit (`l`).
    NearLimit,
    /// At exit (`f`).
    Final,
}

/// The sequence counters: `seq` over all kinds, then one per kind (final dumps have none).
static SEQ: AtomicU64 = AtomicU64::new(0);
static INTERVAL_SEQ: AtomicU64 = AtomicU64::new(0);
static PEAK_SEQ: AtomicU64 = AtomicU64::new(0);
static MANUAL_SEQ: AtomicU64 = AtomicU64::new(0);
static NEAR_LIMIT_SEQ: AtomicU64 = AtomicU64::new(0);

/// The sequenced dumps this process wrote, oldest first, with their kinds (what `max_dumps`
/// prunes).
pub(crate) static WRITTEN: Mutex<VecDeque<(PathBuf, Kind)>> = Mutex::new(VecDeque::new());

/// Held by the writer thread while it writes a dump, and by the exit hook while it writes the
/// final one: the process does not exit in the middle of the writer's dump (which would leave its
/// temporary file and a gap in the sequence).
pub(crate) static WRITING: Mutex<()> = Mutex::new(());

/// Set by the exit hook: the writer writes nothing more.
static EXITING: AtomicBool = AtomicBool::new(false);

/// pid of the process whose writer thread runs (0: none).
static WRITER_PID: AtomicU32 = AtomicU32::new(0);

/// The next file name of `kind`, taking its sequence numbers.
fn next_name(kind: Kind) -> PathBuf {
    // `<prefix>.<pid>`, the pid once (see `sequenced_stem`).
    let stem = setting_values::sequenced_stem(
        lock(&settings::DUMP_PREFIX)
            .as_deref()
            .unwrap_or(DEFAULT_DUMP_PREFIX),
    );
    // Ordering, for the counters: unique tickets; they publish nothing.
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let name = match kind {
        Kind::Final => format!("{stem}.{seq}.f.heap"),
        Kind::Interval => {
            let i = INTERVAL_SEQ.fetch_add(1, Ordering::Relaxed);
            format!("{stem}.{seq}.i{i}.heap")
        }
        Kind::Peak => {
            let u = PEAK_SEQ.fetch_add(1, Ordering::Relaxed);
            format!("{stem}.{seq}.u{u}.heap")
        }
        Kind::Manual => {
            let m = MANUAL_SEQ.fetch_add(1, Ordering::Relaxed);
            format!("{stem}.{seq}.m{m}.heap")
        }
        Kind::NearLimit => {
            let l = NEAR_LIMIT_SEQ.fetch_add(1, Ordering::Relaxed);
            format!("{stem}.{seq}.l{l}.heap")
        }
    };
    PathBuf::from(name)
}

/// Writes the next sequenced dump of `kind` (atomically, mode 0600), then removes this process's
/// oldest sequenced dumps beyond `max_dumps`. Returns the path written.
pub(crate) fn write_sequenced(kind: Kind) -> Result<PathBuf, jeprof_dumpfmt::Error> {
    let _guard = Guard::enter();
    let profile = match kind {
        Kind::Peak => peak_profile(settings::symbolize()),
        _ => report::snapshot(settings::symbolize()).0,
    };
    write_profile(kind, &profile)
}

/// Writes `profile` as the next sequenced dump of `kind` (atomically: written, fsynced, renamed,
/// the directory fsynced), then prunes as [`write_sequenced`] says. Returns the path written.
pub(crate) fn write_profile(
    kind: Kind,
    profile: &Profile,
) -> Result<PathBuf, jeprof_dumpfmt::Error> {
    let _guard = Guard::enter();
    let path = next_name(kind);
    jeprof_dumpfmt::write::write_file(profile, &path, &jeprof_dumpfmt::WriteOptions::default())?;
    let doomed: Vec<PathBuf> = {
        let mut written = lock(&WRITTEN);
        written.push_back((path.clone(), kind));
        prune(&mut written, settings::max_dumps() as usize)
    };
    for old in doomed {
        if let Err(e) = std::fs::remove_file(&old) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!(
                    "jeprof-shim: max_dumps: could not remove {}: {e}",
                    old.display()
                );
            }
        }
    }
    Ok(path)
}

/// Takes out of `written` (oldest first) the oldest dumps beyond `keep` (0: keep all) and returns
/// them, except the newest near-limit dump: the profile that explains an OOM kill is the one a
/// stream of interval dumps must not push out.
fn prune(written: &mut VecDeque<(PathBuf, Kind)>, keep: usize) -> Vec<PathBuf> {
    let mut excess = if keep == 0 {
        0
    } else {
        written.len().saturating_sub(keep)
    };
    let newest_near_limit = written.iter().rposition(|(_, k)| *k == Kind::NearLimit);
    let mut doomed = Vec::new();
    let mut index = 0;
    while excess > 0 && index < written.len() {
        if Some(index + doomed.len()) == newest_near_limit {
            index += 1;
            continue;
        }
        if let Some((path, _)) = written.remove(index) {
            doomed.push(path);
        }
        excess -= 1;
    }
    doomed
}

/// The peak tracker's snapshot as a profile: in-use figures at the peak, no accumulated ones
/// (as jemalloc writes them without `prof_accum`); empty before the first sample.
pub(crate) fn peak_profile(symbolize_now: bool) -> Profile {
    let _guard = Guard::enter();
    let (stacks, live_bytes, taken) = match lock(&PEAK).as_ref() {
        Some(p) => (p.stacks.clone(), p.live_bytes, Some(p.taken)),
        None => (Vec::new(), 0, None),
    };
    let mut profile = Profile::new(settings::sample_rate());
    {
        let table = lock(&STACKS);
        if let Some(table) = table.as_ref() {
            profile.stacks = stacks
                .iter()
                .filter_map(|&(id, inuse)| {
                    let record = table.records.get(id as usize)?;
                    let mut stack = Stack {
                        frames: report::frames_for_dump(record.frames),
                        ..Stack::default()
                    };
                    stack.counts.inuse = inuse;
                    Some(stack)
                })
                .collect();
        }
    }
    profile.mapped_libraries = std::fs::read_to_string("/proc/self/maps").ok();
    profile.annotations = vec![("shim_peak_live_bytes".into(), live_bytes.to_string())];
    if let Some(taken) = taken {
        let since_epoch = taken
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        profile.annotations.push((
            "shim_peak_taken_unix_ms".into(),
            since_epoch.as_millis().to_string(),
        ));
    }
    profile.labels = super::pprof::dump_labels(std::time::SystemTime::now());
    if symbolize_now {
        report::add_symbols(&mut profile);
    }
    profile
}

/// Starts this process's writer thread if a setting asks for automatic dumps and none runs yet.
/// Call only outside an allocation (it spawns a thread).
pub(crate) fn ensure_writer() {
    if !settings::wants_writer() {
        return;
    }
    thread::spawn_once_per_process(&WRITER_PID, "jeprof-shim-writer", "dump writer", writer);
}

/// The writer thread: waits for requests and writes the dumps asked for, forever.
fn writer() {
    let _guard = Guard::enter();
    loop {
        let pending = triggers::wait_for_requests();
        let _writing = lock(&WRITING);
        // Ordering: set before the exit hook takes WRITING, which this thread holds now: the
        // lock orders the two.
        if EXITING.load(Ordering::Relaxed) {
            continue;
        }
        if pending & triggers::WANT_INTERVAL != 0 && settings::dump_interval() != 0 {
            report_failure(Kind::Interval, write_sequenced(Kind::Interval));
        }
        if pending & triggers::WANT_PEAK != 0 && settings::dump_peak() > 0.0 {
            report_failure(Kind::Peak, write_sequenced(Kind::Peak));
        }
    }
}

fn report_failure(kind: Kind, result: Result<PathBuf, jeprof_dumpfmt::Error>) {
    if let Err(e) = result {
        eprintln!("jeprof-shim: {kind:?} dump failed: {e}");
    }
}

/// In a forked child: the parent's writer thread does not exist here, and the parent's files are
/// not the child's to prune. Starts the child's own writer (the child is single-threaded and the
/// profiler's locks are released).
pub(crate) fn after_fork_child() {
    lock(&WRITTEN).clear();
    triggers::after_fork_child();
    ensure_writer();
}

/// The final dump at exit, when `dump_final` is on. Waits for a dump the writer is writing, and
/// keeps the writer from starting another.
pub(crate) fn at_exit() {
    // Ordering: see `writer`.
    EXITING.store(true, Ordering::Relaxed);
    let _writing = lock(&WRITING);
    if settings::dump_final() {
        report_failure(Kind::Final, write_sequenced(Kind::Final));
    }
}

#[cfg(test)]
mod tests {
    use super::{prune, Kind};
    use std::collections::VecDeque;
    use std::path::PathBuf;

    fn written(kinds: &[Kind]) -> VecDeque<(PathBuf, Kind)> {
        kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| (PathBuf::from(i.to_string()), k))
            .collect()
    }

    fn names(doomed: &[PathBuf]) -> Vec<String> {
        doomed.iter().map(|p| p.display().to_string()).collect()
    }

    #[test]
    fn max_dumps_removes_the_oldest_but_never_the_newest_near_limit_dump() {
        use Kind::{Interval as I, NearLimit as L};
        // Oldest first: 0 i, 1 l, 2 i, 3 l, 4 i, 5 i; keep 2.
        let mut list = written(&[I, L, I, L, I, I]);
        let doomed = prune(&mut list, 2);
        // Two are kept, and the newest near-limit dump (3) is one of them.
        assert_eq!(names(&doomed), ["0", "1", "2", "4"]);
        let kept: Vec<String> = list.iter().map(|(p, _)| p.display().to_string()).collect();
        assert_eq!(kept, ["3", "5"]);
        // Without a near-limit dump, the plain rule; 0 keeps everything.
        let mut list = written(&[I, I, I]);
        assert_eq!(names(&prune(&mut list, 1)), ["0", "1"]);
        let mut list = written(&[I, L]);
        assert!(prune(&mut list, 0).is_empty());
        // Keeping 1: it is the near-limit dump, however many came after it.
        let mut list = written(&[L, I, I]);
        assert_eq!(names(&prune(&mut list, 1)), ["1", "2"]);
    }
}
