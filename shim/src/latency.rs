//! The sampled path's latency, timed as a whole, compiled in only with the `path-latency` feature
//! (a normal build reads no clock: [`Stamp`] is then an empty value and every function here is
//! empty).
//!
//! Each sampled allocation is timed from the moment the countdown runs out until the block is
//! handed out (redraw, stack capture, the sampled arena's allocation, the recording), and each free
//! of a sampled object from `dealloc` recognising it until the sampled arena has it back (the
//! record's removal, the arena's free), with the monotonic clock. That is a latency, not a share
//! of CPU time, and it includes one clock reading, measured beside it to be taken off. Its worth is
//! in comparing sampling periods: a sample executes about the same instructions whatever R is, so
//! a latency that grows with R is what the caches and branch predictors have forgotten between two
//! samples of a thread. The CPU-time ratios of the churn bench are the cost figures; this says
//! where they come from.
//!
//! The timers themselves cost about three clock readings and a few shared atomic additions per
//! sample, which shows in the bench's ratios: they are a separate feature so that `cost-breakdown`
//! measurements never include them.

/// A clock reading where a timed part starts: an [`std::time::Instant`] with the `path-latency`
/// feature, an empty value (no clock read) without it.
#[cfg(feature = "path-latency")]
pub(crate) type Stamp = std::time::Instant;
/// Without the `path-latency` feature: no clock reading.
#[cfg(not(feature = "path-latency"))]
#[derive(Clone, Copy)]
pub(crate) struct Stamp;

/// Reads the clock where a timed part starts (only with the `path-latency` feature).
#[inline(always)]
pub(crate) fn stamp() -> Stamp {
    #[cfg(feature = "path-latency")]
    {
        std::time::Instant::now()
    }
    #[cfg(not(feature = "path-latency"))]
    Stamp
}

/// Which half of the sampled path a timing is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// A sampled allocation, from the countdown running out to the block being handed out.
    Alloc,
    /// A free of a sampled object.
    Free,
}

/// The part of the sampled path `path` that began at `started` is done.
#[inline(always)]
pub(crate) fn done(path: Path, started: Stamp) {
    #[cfg(feature = "path-latency")]
    imp::record(path, started);
    #[cfg(not(feature = "path-latency"))]
    let (_, Stamp) = (path, started);
}

/// Mean latency of the sampled path since start or the last [`reset_sampled_path_latency`]
/// (`path-latency` feature only; for measuring, never for production).
///
/// Each mean includes one pair of readings of the monotonic clock; `clock_ns` is the mean of an
/// empty pair, taken beside every timed allocation, to subtract.
#[cfg(feature = "path-latency")]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampledPathLatency {
    /// Sampled allocations timed (`alloc` and `alloc_zeroed`; a sampled `realloc` is not timed).
    pub allocations: u64,
    /// Mean nanoseconds from the countdown running out to the sampled block being handed out.
    pub alloc_ns: f64,
    /// Frees of sampled objects timed.
    pub frees: u64,
    /// Mean nanoseconds of a free of a sampled object.
    pub free_ns: f64,
    /// Mean nanoseconds between two clock readings with nothing in between.
    pub clock_ns: f64,
}

/// The sampled path's latency so far (see [`SampledPathLatency`]).
#[cfg(feature = "path-latency")]
pub fn sampled_path_latency() -> SampledPathLatency {
    let (allocations, alloc_ns) = imp::ALLOCS.mean();
    let (frees, free_ns) = imp::FREES.mean();
    let (_, clock_ns) = imp::CLOCK.mean();
    SampledPathLatency {
        allocations,
        alloc_ns,
        frees,
        free_ns,
        clock_ns,
    }
}

/// Starts [`sampled_path_latency`] afresh. A bench calls it where its timed part begins, so the
/// first samples' one-time costs (the sampled arena, thread caches and tables) stay out.
#[cfg(feature = "path-latency")]
pub fn reset_sampled_path_latency() {
    for timer in [&imp::ALLOCS, &imp::FREES, &imp::CLOCK] {
        timer.reset();
    }
}

#[cfg(feature = "path-latency")]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use super::Path;
    use crate::breakdown::{self, Part};

    /// A count and a sum of nanoseconds.
    pub(super) struct Timer {
        count: AtomicU64,
        nanos: AtomicU64,
    }

    impl Timer {
        const fn new() -> Timer {
            Timer {
                count: AtomicU64::new(0),
                nanos: AtomicU64::new(0),
            }
        }

        fn add(&self, nanos: u64) {
            // Ordering: statistics, read after the threads that wrote them were joined.
            self.count.fetch_add(1, Ordering::Relaxed);
            self.nanos.fetch_add(nanos, Ordering::Relaxed);
        }

        /// (count, mean nanoseconds); the mean is 0 for no count.
        pub(super) fn mean(&self) -> (u64, f64) {
            // Ordering: as in `add`.
            let count = self.count.load(Ordering::Relaxed);
            let nanos = self.nanos.load(Ordering::Relaxed);
            let mean = if count == 0 {
                0.0
            } else {
                nanos as f64 / count as f64
            };
            (count, mean)
        }

        pub(super) fn reset(&self) {
            // Ordering: as in `add`.
            self.count.store(0, Ordering::Relaxed);
            self.nanos.store(0, Ordering::Relaxed);
        }
    }

    pub(super) static ALLOCS: Timer = Timer::new();
    pub(super) static FREES: Timer = Timer::new();
    pub(super) static CLOCK: Timer = Timer::new();

    /// Adds the time since `started` to `path`'s timer, and for allocations an empty pair of clock
    /// readings to [`CLOCK`]. Nothing while a `cost-breakdown` stop point hands out sampled blocks
    /// unrecorded: those are not whole samples.
    pub(super) fn record(path: Path, started: Instant) {
        let nanos = started.elapsed().as_nanos() as u64;
        if breakdown::stops_after(Part::Arena) {
            return;
        }
        match path {
            Path::Alloc => {
                ALLOCS.add(nanos);
                let empty = Instant::now();
                CLOCK.add(empty.elapsed().as_nanos() as u64);
            }
            Path::Free => FREES.add(nanos),
        }
    }
}
