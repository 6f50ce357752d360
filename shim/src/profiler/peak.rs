//! The peak tracker: the live samples as they were at the highest estimated live bytes, kept by
//! tcmalloc's growth-factor rule (`peak_heap_tracker.cc`): a new snapshot whenever the estimated
//! live bytes exceed the last snapshot's by `peak_growth` (1.1 by default).
//!
//! Only the sampled path updates it, and only on a sample that crosses the trigger, so
//! snapshots are taken a logarithmic number of times (at most log base `peak_growth` of the
//! highest live bytes over the first sample's). A snapshot holds one entry per stack with live
//! samples (its id and summed estimate, 40 bytes), so it is bounded by `max_stacks`, not
//! by the number of live samples.
//!
//! The per-stack sums are kept as samples come and go ([`LIVE_BY_STACK`]: a sample adds its
//! estimate to its stack's entry, the free of a sampled object subtracts it), so a snapshot copies
//! the entries of the stacks with live samples instead of visiting every live sample and
//! recomputing its weight. Visiting cost about 270 instructions per live sample per snapshot; with
//! a snapshot at every 10% of growth that is about 11 visits per sample live at the peak, which
//! made the tracker the largest part of a sample on a growing heap (`bench/RESULTS.md`). Keeping
//! the sums costs a lock and five additions per sample (the fifth counts the stack's samples ever
//! taken, for the leak history) and four subtractions per sampled free.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use jeprof_dumpfmt::Estimate;

use crate::base::settings;
use crate::base::sync::{lock, FutexMutex};
use crate::parts::triggers;

/// The live samples at the peak, summed per stack.
pub(crate) struct PeakSnapshot {
    /// Σ of the samples' rounded estimated bytes when the snapshot was taken.
    pub(crate) live_bytes: u64,
    /// Stack id and its summed in-use estimate.
    pub(crate) stacks: Vec<(u32, Estimate)>,
    /// When it was taken.
    pub(crate) taken: SystemTime,
}

impl PeakSnapshot {
    /// Heap bytes held (capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.stacks.capacity() * std::mem::size_of::<(u32, Estimate)>()
    }
}

/// Snapshots taken since start.
static SNAPSHOTS: AtomicU64 = AtomicU64::new(0);

/// Snapshots taken since start.
pub(crate) fn snapshots_taken() -> u64 {
    // Ordering: a statistics counter, read on its own.
    SNAPSHOTS.load(Ordering::Relaxed)
}

/// The last snapshot.
pub(crate) static PEAK: Mutex<Option<PeakSnapshot>> = Mutex::new(None);

/// The live bytes of the last peak the writer was asked to dump (0: none yet).
static DUMPED_PEAK: AtomicU64 = AtomicU64::new(0);

/// One stack's live samples: how many, and the sum of their estimates; and how many samples it
/// ever had (the leak history's cumulative sampled allocations).
#[derive(Clone, Copy, Default)]
struct StackLive {
    samples: u64,
    sum: Estimate,
    allocated: u64,
}

/// One stack's figures as [`copy_live`] gives them.
#[derive(Clone, Copy)]
pub(crate) struct StackFigures {
    /// The stack's id.
    pub(crate) id: u32,
    /// Its live samples.
    pub(crate) samples: u64,
    /// The samples it had since start, freed ones included.
    pub(crate) allocated: u64,
    /// The sum of its live samples' estimates.
    pub(crate) sum: Estimate,
}

/// Replaces `out`'s contents with the figures of every stack with live samples. The caller holds
/// the re-entrancy guard (`out` may grow under the lock, as [`on_sample`]'s table does).
pub(crate) fn copy_live(out: &mut Vec<StackFigures>) {
    out.clear();
    let live = LIVE_BY_STACK.lock();
    out.reserve(live.live_stacks);
    out.extend(
        live.stacks
            .iter()
            .enumerate()
            .filter(|(_, s)| s.samples != 0)
            .map(|(id, s)| StackFigures {
                id: id as u32,
                samples: s.samples,
                allocated: s.allocated,
                sum: s.sum,
            }),
    );
}

/// The live samples summed per stack, as of the last recorded sample or sampled free.
pub(crate) struct LiveByStack {
    /// Indexed by stack id, up to the highest id recorded so far.
    stacks: Vec<StackLive>,
    /// Stacks with at least one live sample.
    live_stacks: usize,
    /// Σ of the live samples' rounded weights ([`triggers::weight_bytes`]), the figure
    /// `triggers` keeps as an atomic.
    live_bytes: u64,
}

impl LiveByStack {
    /// Heap bytes held (capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.stacks.capacity() * std::mem::size_of::<StackLive>()
    }
}

/// The per-stack sums. Taken with no other profiler lock held, and nothing else is locked while
/// it is held (it is the last lock of the order `fork` takes them in).
pub(crate) static LIVE_BY_STACK: FutexMutex<LiveByStack> = FutexMutex::new(LiveByStack {
    stacks: Vec::new(),
    live_stacks: 0,
    live_bytes: 0,
});

/// Adds a recorded sample of stack `stack`, estimate `estimate` and rounded weight `bytes`.
/// Called by the sampled path inside the re-entrancy guard (the table may grow), after the sample
/// is in the live table and before [`on_new_high`], so a snapshot it triggers holds it. Inlined
/// into the sampled path: a call's saved registers cost about as much as its additions.
#[inline]
pub(crate) fn on_sample(stack: u32, estimate: &Estimate, bytes: u64) {
    let mut live = LIVE_BY_STACK.lock();
    let live = &mut *live;
    let i = stack as usize;
    if i >= live.stacks.len() {
        // Amortised growth: `resize` reserves at least double the capacity.
        live.stacks.resize(i + 1, StackLive::default());
    }
    let entry = &mut live.stacks[i];
    if entry.samples == 0 {
        live.live_stacks += 1;
    }
    entry.samples += 1;
    entry.allocated += 1;
    entry.sum.add(estimate);
    live.live_bytes += bytes;
}

/// Subtracts a freed sample (what [`on_sample`] added for it). Needs no re-entrancy guard: it
/// neither allocates nor frees.
pub(crate) fn on_free(stack: u32, estimate: &Estimate, bytes: u64) {
    let mut live = LIVE_BY_STACK.lock();
    let live = &mut *live;
    live.live_bytes = live.live_bytes.wrapping_sub(bytes);
    let Some(entry) = live.stacks.get_mut(stack as usize) else {
        return;
    };
    match entry.samples {
        0 => {}
        1 => {
            // The last one: exactly zero, not what is left of the sum after the subtractions
            // (rounding), so a stack with nothing live never shows up in a snapshot. The count of
            // samples ever allocated stays.
            *entry = StackLive {
                allocated: entry.allocated,
                ..StackLive::default()
            };
            live.live_stacks -= 1;
        }
        _ => {
            entry.samples -= 1;
            entry.sum.sub(estimate);
        }
    }
}

/// Called by the sampled path (inside the re-entrancy guard, no lock held) when the live figure
/// `live` crossed the tracker's trigger: one thread takes a snapshot, the others go on.
#[cold]
#[inline(never)]
pub(crate) fn on_new_high(live: u64) {
    if !triggers::claim_peak(live) {
        return;
    }
    let (stacks, live_bytes) = {
        let by_stack = LIVE_BY_STACK.lock();
        let mut stacks = Vec::with_capacity(by_stack.live_stacks);
        stacks.extend(
            by_stack
                .stacks
                .iter()
                .enumerate()
                .filter(|(_, s)| s.samples != 0)
                .map(|(id, s)| (id as u32, s.sum)),
        );
        (stacks, by_stack.live_bytes)
    };
    let growth = settings::peak_growth();
    let next = (live.max(live_bytes) as f64 * growth).min(u64::MAX as f64 / 2.0) as u64;
    // Ordering: a statistics counter.
    SNAPSHOTS.fetch_add(1, Ordering::Relaxed);
    let snapshot = PeakSnapshot {
        live_bytes,
        stacks,
        taken: SystemTime::now(),
    };
    let old = lock(&PEAK).replace(snapshot);
    // Freed after the lock is released.
    drop(old);
    triggers::set_peak_trigger(next);
    let factor = settings::dump_peak();
    // Ordering: only the elected thread of a snapshot writes it; read on its own.
    let dumped = DUMPED_PEAK.load(Ordering::Relaxed);
    if factor > 0.0 && live_bytes as f64 > dumped as f64 * factor {
        // Ordering: see above.
        DUMPED_PEAK.store(live_bytes, Ordering::Relaxed);
        triggers::request(triggers::WANT_PEAK);
    }
}
