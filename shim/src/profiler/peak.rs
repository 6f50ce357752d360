//! The peak tracker: the live samples as they were at the highest estimated live bytes, kept by
//! tcmalloc's growth-factor rule (`peak_heap_tracker.cc`): a new snapshot whenever the estimated
//! live bytes exceed the last snapshot's by `peak_growth` (1.1 by default).
//!
//! Only the sampled path updates it, and only on a sample that crosses the trigger, so
//! snapshots are taken a logarithmic number of times (at most log base `peak_growth` of the
//! highest live bytes over the first sample's). A snapshot holds one entry per stack with live
//! samples (its id and summed estimate, 40 bytes), so it is bounded by `max_stacks`, not
//! by the number of live samples. The snapshot is copied with each live shard's lock held in
//! turn, as a dump's is; the tracker's own lock is taken only to store it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use jeprof_dumpfmt::Estimate;

use crate::base::hash::Map;
use crate::base::settings;
use crate::base::sync::lock;
use crate::parts::live_samples::LIVE;
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

/// Called by the sampled path (inside the re-entrancy guard, no lock held) when the live figure
/// `live` crossed the tracker's trigger: one thread takes a snapshot, the others go on.
pub(crate) fn on_new_high(live: u64) {
    if !triggers::claim_peak(live) {
        return;
    }
    let mut per_stack: Map<u32, Estimate> = Map::default();
    let mut live_bytes = 0u64;
    for shard in LIVE.iter() {
        let shard = lock(shard);
        for sample in shard.samples() {
            live_bytes += triggers::weight_bytes(sample.counted_bytes);
            per_stack
                .entry(sample.stack)
                .or_default()
                .add(&sample.estimate());
        }
    }
    let growth = settings::peak_growth();
    let next = (live.max(live_bytes) as f64 * growth).min(u64::MAX as f64 / 2.0) as u64;
    // Ordering: a statistics counter.
    SNAPSHOTS.fetch_add(1, Ordering::Relaxed);
    let snapshot = PeakSnapshot {
        live_bytes,
        stacks: per_stack.into_iter().collect(),
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
