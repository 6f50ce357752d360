//! The hot path: a per-thread byte countdown, and the re-entrancy guard.
//!
//! Every allocation subtracts its requested size from `BYTES_UNTIL_SAMPLE`; only when the counter
//! reaches zero or below does [`on_countdown_expired`] run. That function draws the next countdown
//! from the exponential distribution with mean R (the per-byte Bernoulli process of
//! `design-notes.md` §1, realised as a geometric countdown) and says whether this allocation is a
//! sample, and with which period its countdown was drawn.
//!
//! Everything here is a `const`-initialised thread-local without a destructor, so it is usable
//! before `main`, during thread-local destruction and in exiting threads; `try_with` failing (it
//! never does for such thread-locals on Linux, but the API allows it) means "pass through".

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::config;

/// Countdown used while sampling is off or inactive: the thread re-reads the settings after this
/// many bytes, so turning sampling on takes effect within 64 MiB of allocation per thread, and the
/// cost with sampling off is one slow-path visit per 64 MiB.
const OFF_RECHECK_BYTES: i64 = 64 << 20;

thread_local! {
    /// Bytes this thread may still allocate before its next sample. The only state the fast path
    /// touches.
    static BYTES_UNTIL_SAMPLE: Cell<i64> = const { Cell::new(0) };
    /// True while the profiler itself runs on this thread: its allocations are never sampled.
    static IN_PROFILER: Cell<bool> = const { Cell::new(false) };
    /// The countdown saved by the outermost [`Guard`], restored when it ends.
    static SAVED_COUNTDOWN: Cell<i64> = const { Cell::new(0) };
    /// The period R the current countdown was drawn with (0: sampling was off).
    static COUNTDOWN_PERIOD: Cell<u64> = const { Cell::new(0) };
    /// splitmix64 state of this thread's generator.
    static RNG_STATE: Cell<u64> = const { Cell::new(0) };
    /// The settings generation this thread last saw (0: never initialised).
    static SEEN_GENERATION: Cell<u64> = const { Cell::new(0) };
    /// This thread's uid (the `t<uid>` of dumps), `u64::MAX` until assigned.
    static THREAD_UID: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Bumped whenever the sample rate, activity or seed changes, so threads redraw their countdown.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Next thread uid, in the order threads first reach the slow path.
static NEXT_THREAD_UID: AtomicU64 = AtomicU64::new(0);
/// Whether any seed was configured.
static SEEDED: AtomicBool = AtomicBool::new(false);
/// The configured seed (meaningful when `SEEDED`).
static SEED: AtomicU64 = AtomicU64::new(0);

/// Subtracts `size` from this thread's countdown; true when it has run out (then call
/// [`on_countdown_expired`]). One thread-local subtract and compare: no lock, no atomic, no
/// allocation.
#[inline(always)]
pub(crate) fn countdown_expired(size: usize) -> bool {
    BYTES_UNTIL_SAMPLE
        .try_with(|left| {
            // Sizes are at most isize::MAX and the counter at most about 2^62, so this never wraps.
            let now = left.get().wrapping_sub(size as i64);
            left.set(now);
            now <= 0
        })
        .unwrap_or(false)
}

/// The slow path of the countdown: redraws it and decides whether the allocation of `size` bytes
/// that exhausted it is a sample. Returns the period the sample was drawn with.
///
/// Allocations made by the profiler itself (inside a [`Guard`]) never get here: the guard parks
/// the countdown and restores it afterwards.
#[cold]
#[inline(never)]
pub(crate) fn on_countdown_expired(size: usize) -> Option<u64> {
    if IN_PROFILER.try_with(Cell::get).ok()? {
        // Only after 2^62 bytes inside one guard; never a sample.
        let _ = BYTES_UNTIL_SAMPLE.try_with(|c| c.set(GUARDED_COUNTDOWN));
        return None;
    }
    {
        let _guard = Guard::enter();
        crate::profiler::ensure_init();
    }
    let generation = GENERATION.load(Ordering::Relaxed); // Ordering: a counter read on its own; the settings it announces are read with their own loads.
    let sampled_period = if SEEN_GENERATION.try_with(Cell::get).ok()? != generation {
        // First visit of this thread, or the settings changed: restart the process from a fresh
        // countdown, then charge this allocation to it.
        SEEN_GENERATION.try_with(|g| g.set(generation)).ok()?;
        reseed_this_thread();
        redraw();
        if !countdown_expired(size) {
            return None;
        }
        COUNTDOWN_PERIOD.try_with(Cell::get).ok()?
    } else {
        COUNTDOWN_PERIOD.try_with(Cell::get).ok()?
    };
    redraw();
    if sampled_period == 0 {
        return None;
    }
    Some(sampled_period)
}

/// Draws a fresh countdown for the current settings.
fn redraw() {
    let period = config::effective_sample_rate();
    let (bytes, drawn_with) = if period == 0 {
        (OFF_RECHECK_BYTES, 0)
    } else {
        (draw_countdown(next_random(), period), period)
    };
    let _ = BYTES_UNTIL_SAMPLE.try_with(|c| c.set(bytes));
    let _ = COUNTDOWN_PERIOD.try_with(|c| c.set(drawn_with));
}

/// `ceil(−ln(U)·R)` for `U` uniform in (0, 1], built from the top 53 bits of `random`: an exponential
/// variate with mean R, the distance to the next picked byte. At least 1.
pub(crate) fn draw_countdown(random: u64, period: u64) -> i64 {
    let u = ((random >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
    let bytes = (-u.ln() * period as f64).ceil();
    // U ≥ 2^-53 bounds the draw by 37·R; the clamp only matters for absurd periods.
    bytes.clamp(1.0, (1u64 << 62) as f64) as i64
}

/// splitmix64: a tiny, well-mixed generator; state advances by a constant.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn next_random() -> u64 {
    RNG_STATE
        .try_with(|s| {
            let mut state = s.get();
            let r = splitmix64(&mut state);
            s.set(state);
            r
        })
        .unwrap_or(0x2545_F491_4F6C_DD1D)
}

/// Seeds this thread's generator: from the configured seed and the thread's uid when a seed is
/// set (deterministic per thread creation order), else from address and clock entropy.
fn reseed_this_thread() {
    let uid = thread_uid();
    // Ordering: SEEDED and SEED are plain settings; a racing `reseed` may be seen half-way, which
    // only means this thread picks up the new seed at its next generation change.
    let state = if SEEDED.load(Ordering::Relaxed) {
        let mut s = SEED.load(Ordering::Relaxed) ^ uid.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        splitmix64(&mut s)
    } else {
        let local = 0u8;
        let mut s = (std::ptr::addr_of!(local) as u64) ^ uid.rotate_left(32) ^ clock_nanos();
        splitmix64(&mut s) ^ splitmix64(&mut s)
    };
    let _ = RNG_STATE.try_with(|c| c.set(state));
}

fn clock_nanos() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000) ^ ts.tv_nsec as u64
}

/// This thread's uid, assigned on first use in the order threads ask.
pub(crate) fn thread_uid() -> u64 {
    THREAD_UID
        .try_with(|c| {
            let uid = c.get();
            if uid != u64::MAX {
                return uid;
            }
            // Ordering: a unique-ticket counter; nothing else is published through it.
            let uid = NEXT_THREAD_UID.fetch_add(1, Ordering::Relaxed);
            c.set(uid);
            uid
        })
        .unwrap_or(u64::MAX - 1)
}

/// Makes every thread redraw its countdown at its next slow path, and the calling thread at its
/// next allocation.
pub(crate) fn settings_changed() {
    // Ordering: see `on_countdown_expired`; the counter carries no data.
    GENERATION.fetch_add(1, Ordering::Relaxed);
    if IN_PROFILER.try_with(Cell::get).unwrap_or(false) {
        let _ = SAVED_COUNTDOWN.try_with(|c| c.set(0));
    } else {
        let _ = BYTES_UNTIL_SAMPLE.try_with(|c| c.set(0));
    }
}

/// Sets (or clears) the seed and restarts every thread's countdown from it.
pub(crate) fn set_seed(seed: Option<u64>) {
    // Ordering: settings read on their own (see `reseed_this_thread`).
    SEED.store(seed.unwrap_or(0), Ordering::Relaxed);
    SEEDED.store(seed.is_some(), Ordering::Relaxed);
    settings_changed();
}

/// Countdown while inside a [`Guard`]: the profiler's own allocations never reach the slow path.
const GUARDED_COUNTDOWN: i64 = 1 << 62;

/// The re-entrancy guard: while one is alive on a thread, that thread's allocations are never
/// sampled (they go straight to the inner allocator) and do not consume its countdown, so the
/// profiler's own allocations (whose sizes depend on addresses and timing) leave seeded sampling
/// deterministic. Restores the previous state on drop, so guards nest.
pub(crate) struct Guard {
    was_inside: bool,
}

impl Guard {
    /// Marks this thread as inside the profiler.
    pub(crate) fn enter() -> Guard {
        let was_inside = IN_PROFILER.try_with(|c| c.replace(true)).unwrap_or(true);
        if !was_inside {
            let _ = BYTES_UNTIL_SAMPLE.try_with(|left| {
                let _ = SAVED_COUNTDOWN.try_with(|saved| saved.set(left.get()));
                left.set(GUARDED_COUNTDOWN);
            });
        }
        Guard { was_inside }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.was_inside {
            let _ = BYTES_UNTIL_SAMPLE.try_with(|left| {
                let _ = SAVED_COUNTDOWN.try_with(|saved| left.set(saved.get()));
            });
        }
        let _ = IN_PROFILER.try_with(|c| c.set(self.was_inside));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn countdown_mean_is_the_period() {
        let mut state = 7;
        let period = 524_288u64;
        let n = 200_000;
        let mean = (0..n)
            .map(|_| draw_countdown(splitmix64(&mut state), period) as f64)
            .sum::<f64>()
            / n as f64;
        // Standard error of the mean is R/√n ≈ 0.22% of R.
        assert!(
            (mean / period as f64 - 1.0).abs() < 0.01,
            "mean countdown {mean}"
        );
    }

    #[test]
    fn countdown_is_at_least_one_byte() {
        assert_eq!(draw_countdown(u64::MAX, 1), 1);
        assert!(draw_countdown(0, 1 << 19) > 1 << 19);
    }
}
