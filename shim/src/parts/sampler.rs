//! The countdown: a per-thread byte countdown and its draw.
//!
//! Every allocation subtracts its requested size from the thread's countdown; only when the size
//! exceeds what was left (the unsigned subtraction borrows) does [`on_countdown_expired`] run. That
//! function draws the next countdown from the exponential distribution with mean R (the per-byte
//! Bernoulli process of `docs/design.md` §1, realised as a geometric countdown) and says whether
//! this allocation is a sample, and with which period its countdown was drawn.

use crate::base::settings;
use crate::base::thread::{self, Guard, ThreadState, GUARDED_COUNTDOWN};

/// Countdown used while sampling is off or inactive: the thread re-reads the settings after this
/// many bytes, so turning sampling on takes effect within 64 MiB of allocation per thread, and the
/// cost with sampling off is one slow-path visit per 64 MiB.
const OFF_RECHECK_BYTES: u64 = 64 << 20;

/// Subtracts `size` from this thread's countdown; true when it has run out (then call
/// [`on_countdown_expired`]). One thread-local subtract and a branch on its borrow: no lock, no
/// atomic, no allocation.
#[inline(always)]
pub(crate) fn countdown_expired(size: usize) -> bool {
    thread::with_thread(|t| {
        let (left, borrowed) = t.countdown.get().overflowing_sub(size as u64);
        t.countdown.set(left);
        borrowed
    })
    .unwrap_or(false)
}

/// The slow path of the countdown: redraws it and decides whether the allocation of `size` bytes
/// that exhausted it is a sample. Returns the period the sample was drawn with.
///
/// `ensure_init` runs (inside the re-entrancy guard) at a thread's first visit and after every
/// settings change, before the countdown is drawn: the profiler passes its initialisation, which
/// may apply `JEPROF_SHIM` and so change the settings the draw reads.
///
/// Allocations made by the profiler itself (inside a [`Guard`]) never get here: the guard parks
/// the countdown and restores it afterwards.
#[cold]
#[inline(never)]
pub(crate) fn on_countdown_expired(size: usize, ensure_init: impl FnOnce()) -> Option<u64> {
    thread::with_thread(|t| expired(t, size, ensure_init)).flatten()
}

fn expired(t: &ThreadState, size: usize, ensure_init: impl FnOnce()) -> Option<u64> {
    if thread::in_profiler(t) {
        // Only after 2^62 bytes inside one guard; never a sample.
        t.countdown_in_use().set(GUARDED_COUNTDOWN);
        return None;
    }
    if t.seen_epoch.get() != thread::epoch() {
        // First visit of this thread, or the settings changed: make sure the environment was
        // read, restart the process from a fresh countdown, then charge this allocation to it.
        {
            let _guard = Guard::enter();
            ensure_init();
        }
        // Read again: applying the environment may have changed the settings.
        t.seen_epoch.set(thread::epoch());
        reseed(t);
        redraw(t);
        let countdown = t.countdown_in_use();
        let (left, borrowed) = countdown.get().overflowing_sub(size as u64);
        countdown.set(left);
        if !borrowed {
            return None;
        }
    }
    let sampled_period = t.period.get();
    redraw(t);
    (sampled_period != 0).then_some(sampled_period)
}

/// Draws a fresh countdown for the current settings.
fn redraw(t: &ThreadState) {
    let period = settings::effective_sample_rate();
    let (bytes, drawn_with) = if period == 0 {
        (OFF_RECHECK_BYTES, 0)
    } else {
        (draw_countdown(next_random(t), period), period)
    };
    t.countdown_in_use().set(bytes);
    t.period.set(drawn_with);
}

/// Largest period the countdown honours; larger ones are treated as this one (2^56 bytes: no
/// program allocates that much, so sampling is effectively off either way). It keeps every draw
/// below 2^62, where the float-to-integer conversion below is exact and in range.
const MAX_PERIOD: u64 = 1 << 56;

/// `floor(X)` for `X = −ln(U)·R`, `U = k·2⁻⁵³` with `k` uniform in 1..=2⁵³ (the top 53 bits of
/// `random`, plus one): `X` is exponential with mean R, the distance to the next picked byte. An
/// allocation of `Z` bytes is a sample when `Z > floor(X)`, i.e. when `X < Z`, which has
/// probability `1 − e^(−Z/R)`.
pub(crate) fn draw_countdown(random: u64, period: u64) -> u64 {
    let x = neg_ln_unit((random >> 11) + 1) * (period.min(MAX_PERIOD) as i64 as f64);
    // x is finite and 0 ≤ x ≤ 37·2^56 < 2^62 (−ln U ≤ 53·ln 2 < 37), so the cast truncates exactly
    // (a tiny negative rounding of 0 saturates to 0).
    x as u64
}

/// The constants of [`neg_ln_unit`], together in one cache line. Written as float literals in the
/// code, they would each be loaded from wherever the linker put them in the merged constant pool:
/// a dozen scattered lines, each a cache miss on a path that runs once per 512 KiB.
#[repr(C, align(64))]
struct LnConstants([f64; 8]);

static LN_CONSTANTS: LnConstants = LnConstants([
    1.0,
    1.0 / 3.0,
    1.0 / 5.0,
    1.0 / 7.0,
    1.0 / 9.0,
    1.0 / 11.0,
    std::f64::consts::LN_2,
    0.0,
]);

/// The bits of √2 as an f64 in [1, 2): mantissas above it are halved into [√½, 1).
const SQRT_2_BITS: u64 = 0x3FF6_A09E_667F_3BCD;

/// `−ln(k·2⁻⁵³)` for `k` in 1..=2⁵³, to within a few ulps, from integer bit operations, one
/// division and one line of constants (libm's `log` reads a 4 KiB table). With `k = 2^e·m`,
/// `m` is brought into [√½, √2) and `ln m = 2·atanh(s)` for `s = (m − 1)/(m + 1)`, `|s| ≤ 0.1716`,
/// is summed to `s¹¹` (the next term is below 2e−11 of the result):
/// `−ln(k·2⁻⁵³) = (53 − e)·ln 2 − ln m`.
fn neg_ln_unit(k: u64) -> f64 {
    debug_assert!((1..=1 << 53).contains(&k));
    // SAFETY: LN_CONSTANTS is an initialised, aligned static; a volatile read keeps the compiler
    // from folding its values back into scattered constant-pool loads.
    let [one, c3, c5, c7, c9, c11, ln_2, _] = unsafe { std::ptr::read_volatile(&LN_CONSTANTS.0) };
    let lz = k.leading_zeros();
    let mut e = 63 - lz as i64;
    // Shift the leading 1 out and keep the next 52 bits as the mantissa of m in [1, 2).
    let mut bits = (((k << lz) << 1) >> 12) | (1023 << 52);
    if bits > SQRT_2_BITS {
        // m/2 in [√½, 1): one less in the exponent field.
        bits -= 1 << 52;
        e += 1;
    }
    let m = f64::from_bits(bits);
    let s = (m - one) / (m + one);
    let s2 = s * s;
    let series = one + s2 * (c3 + s2 * (c5 + s2 * (c7 + s2 * (c9 + s2 * c11))));
    (53 - e) as f64 * ln_2 - (s + s) * series
}

/// splitmix64: a tiny, well-mixed generator; state advances by a constant.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn next_random(t: &ThreadState) -> u64 {
    let mut state = t.rng.get();
    let r = splitmix64(&mut state);
    t.rng.set(state);
    r
}

/// Seeds this thread's generator: from the configured seed and the thread's uid when a seed is
/// set (deterministic per thread creation order), else from address and clock entropy.
fn reseed(t: &ThreadState) {
    let uid = thread::uid_of(t);
    let state = match settings::seed() {
        Some(seed) => {
            let mut s = seed ^ uid.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            splitmix64(&mut s)
        }
        None => {
            let local = 0u8;
            let mut s = (std::ptr::addr_of!(local) as u64) ^ uid.rotate_left(32) ^ clock_nanos();
            splitmix64(&mut s) ^ splitmix64(&mut s)
        }
    };
    t.rng.set(state);
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
    fn an_allocation_is_sampled_with_probability_one_minus_e_to_the_minus_z_over_r() {
        // An allocation of Z bytes is a sample when Z > countdown.
        let mut state = 11;
        let period = 4096u64;
        let n = 400_000;
        let draws: Vec<u64> = (0..n)
            .map(|_| draw_countdown(splitmix64(&mut state), period))
            .collect();
        for z in [1u64, 64, 1000, 4096, 20_000] {
            let hits = draws.iter().filter(|&&d| z > d).count() as f64;
            let p = 1.0 - (-(z as f64) / period as f64).exp();
            let se = (p * (1.0 - p) / n as f64).sqrt();
            let got = hits / n as f64;
            assert!((got - p).abs() < 5.0 * se + 1e-6, "z {z}: {got} vs {p}");
        }
        // u = 1 draws 0: the very next byte is picked.
        assert_eq!(draw_countdown(u64::MAX, 1 << 19), 0);
        assert!(draw_countdown(0, 1 << 19) > 1 << 19);
    }

    #[test]
    fn table_free_logarithm_matches_libm() {
        let mut state = 3;
        let mut worst = 0.0f64;
        let sqrt_half_k = (std::f64::consts::FRAC_1_SQRT_2 * (1u64 << 53) as f64) as u64;
        let fixed = [
            1,
            2,
            3,
            1 << 52,
            (1 << 53) - 1,
            sqrt_half_k,
            sqrt_half_k + 1,
            12345,
        ];
        let random = (0..200_000).map(|_| (splitmix64(&mut state) >> 11) + 1);
        for k in fixed.into_iter().chain(random) {
            let want = -(k as f64 / (1u64 << 53) as f64).ln();
            let got = neg_ln_unit(k);
            worst = worst.max((got - want).abs() / want);
        }
        assert_eq!(neg_ln_unit(1 << 53), 0.0);
        assert!(worst < 1e-10, "worst relative error {worst:e}");
    }
}
