//! The statistics of per-byte sampling, in one place.
//!
//! # The sampling model
//! Every allocated byte is picked independently with probability 1/R, where R is the *sample period*
//! (`heap_v2/<R>` in a dump). An allocation of Z bytes is sampled when at least one of its bytes is
//! picked, so
//!
//! ```text
//! p(Z) = 1 − (1 − 1/R)^Z ≈ 1 − e^(−Z/R)
//! ```
//!
//! jemalloc, jeprof and this crate all use the exponential form (the per-byte process realised as a
//! geometric countdown, see `docs/design.md` §1).
//!
//! # Unbiasing: per sample, then sum
//! A sampled allocation stands for 1/p(Z) allocations and Z/p(Z) bytes. Let I_i be the indicator that
//! allocation i was sampled; E(I_i) = p_i, so Σ I_i·Z_i/p_i is an unbiased estimate of Σ Z_i, whatever
//! the mix of sizes. Its variance is Σ Z_i²(1 − p_i)/p_i (independent Bernoulli trials), which the
//! samples estimate without bias as Σ I_i·Z_i²(1 − p_i)/p_i² ([`SampleWeight`]).
//!
//! # What jeprof does, and the change of variables that makes it right
//! jeprof reads one `(n, s)` pair per stack entry and scales it by its *average* size:
//! `F = 1/(1 − e^(−(s/n)/R))`, printing `(n·F, s·F)` ([`jeprof_unbias`]). That is exact only when every
//! sample behind the entry had the same size. jemalloc 5.3 therefore writes, for the true unbiased pair
//! `(c, b)`, the pair that jeprof's formula maps back onto it ([`encode`]): with `x = b/c`,
//!
//! ```text
//! s_in = b·(1 − e^(−x/R)),   n_in = s_in / x = c·(1 − e^(−x/R))
//! ```
//!
//! because `s_in/n_in = x`, jeprof's factor is `1/(1 − e^(−x/R))`, and `n_in·F = c`, `s_in·F = b`.
//! The integer rounding of `(n_in, s_in)` is the only loss; `crate::encode` deals with it.

/// Probability that an allocation of `size` bytes is sampled at mean period `period` bytes:
/// `1 − e^(−size/period)`. A period of 0 means "no sampling, every allocation recorded" (p = 1), which is
/// also how jeprof reads `heap_v2/0`.
pub fn sample_probability(size: f64, period: f64) -> f64 {
    if period <= 0.0 {
        return 1.0;
    }
    // −expm1(−x) = 1 − e^(−x) without the cancellation that `1.0 - exp(-x)` suffers for small x
    // (an 8-byte object at R = 512 KiB has x ≈ 1.5e−5).
    -(-size / period).exp_m1()
}

/// What one sampled allocation of `size` bytes stands for, at period `period`.
///
/// `objects = 1/p`, `bytes = size/p`; the variance terms are the unbiased estimates of the variance
/// that this allocation's Bernoulli trial adds: `(1 − p)/p²` for objects and `size²(1 − p)/p²` for bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleWeight {
    /// Estimated number of allocations this sample stands for (1/p).
    pub objects: f64,
    /// Estimated bytes this sample stands for (size/p).
    pub bytes: f64,
    /// Unbiased estimate of the variance contribution to the object count, (1 − p)/p².
    pub objects_variance: f64,
    /// Unbiased estimate of the variance contribution to the byte count, size²(1 − p)/p².
    pub bytes_variance: f64,
}

impl SampleWeight {
    /// Weight of one sampled allocation of `size` bytes at period `period`.
    pub fn of(size: f64, period: f64) -> SampleWeight {
        SampleWeight::of_allocation(size, size, period)
    }

    /// Weight of one sampled allocation that asked for `requested` bytes and occupies `usable`
    /// bytes (its allocator's size class), at period `period`.
    ///
    /// A sampler that charges its countdown with the *requested* size samples the allocation with
    /// probability `p = p(requested)`, while the heap holds `usable` bytes for it. With I the
    /// indicator that it was sampled, `E(I) = p`, so `I·usable/p` is an unbiased estimate of its
    /// `usable` bytes and `I/p` of its one object; their variances are `usable²(1 − p)/p` and
    /// `(1 − p)/p`, which a sample estimates without bias as `usable²(1 − p)/p²` and `(1 − p)/p²`
    /// (`E(I/p²·(1 − p)) = (1 − p)/p`). Taking p from the usable size instead would bias every
    /// estimate low, most for small objects rounded up to a larger class.
    pub fn of_allocation(requested: f64, usable: f64, period: f64) -> SampleWeight {
        SampleWeight::of_probability(sample_probability(requested, period), usable)
    }

    /// Weight of one sampled allocation that occupies `usable` bytes and was sampled with
    /// probability `p` ([`sample_probability`] of its requested size): what
    /// [`SampleWeight::of_allocation`] computes once it has `p`, to the last bit, for a caller that
    /// keeps `p` rather than recomputing the exponential.
    #[inline]
    pub fn of_probability(p: f64, usable: f64) -> SampleWeight {
        let objects = 1.0 / p;
        let q = (1.0 - p) / (p * p);
        SampleWeight {
            objects,
            bytes: usable * objects,
            objects_variance: q,
            bytes_variance: usable * usable * q,
        }
    }
}

/// The pair `(n_in, s_in)` (as reals) that jeprof's per-entry formula maps back onto the true unbiased
/// pair `(objects, bytes)` at period `period`: jemalloc's `prof_do_unbias` before its integer cast.
///
/// Returns `(0, 0)` when either input is not positive (jemalloc prints `0: 0` then, and a `n > 0, s = 0`
/// entry would make jeprof divide by zero).
pub fn encode(objects: f64, bytes: f64, period: f64) -> (f64, f64) {
    if !(objects > 0.0 && bytes > 0.0) {
        return (0.0, 0.0);
    }
    let average = bytes / objects;
    let p = sample_probability(average, period);
    (objects * p, bytes * p)
}

/// Exactly what jeprof's `AdjustSamples` (heap_v2 branch) computes for one `(n, s)` pair at period
/// `period`, in the same floating-point operations, so that readers agree with it to the last bit:
///
/// ```text
/// period == 0 or n == 0:  (n, s) unchanged
/// otherwise:              ratio = (s/n)/period;  F = 1/(1 − exp(−ratio));  (n·F, s·F)
/// ```
///
/// jeprof dies with a division by zero on `n > 0, s = 0`; this function returns infinities there, and
/// the reader rejects such lines before calling it.
pub fn jeprof_unbias(n: u64, s: u64, period: u64) -> (f64, f64) {
    let (n, s) = (n as f64, s as f64);
    if period == 0 || n == 0.0 {
        return (n, s);
    }
    let ratio = (s / n) / period as f64;
    let scale = 1.0 / (1.0 - (-ratio).exp());
    (n * scale, s * scale)
}

/// [`jeprof_unbias`] together with [`variance_from_average`]'s estimate, from one `exp`: the reader's
/// per-line work. With `F = 1/(1 − e^(−x/R))` jeprof's factor (so `p = 1/F`), an entry of `n` samples
/// of average size `x = s/n` has variance estimate `n·(1 − p)/p² = n·F·(F − 1)` for objects, times `x²`
/// for bytes. Returns `(objects, bytes, objects_variance, bytes_variance)`; the first two are
/// bit-identical to [`jeprof_unbias`].
pub fn jeprof_unbias_with_variance(n: u64, s: u64, period: u64) -> (f64, f64, f64, f64) {
    if period == 0 || n == 0 {
        return (n as f64, s as f64, 0.0, 0.0);
    }
    let (nf, sf) = (n as f64, s as f64);
    let ratio = (sf / nf) / period as f64;
    let scale = 1.0 / (1.0 - (-ratio).exp());
    let objects_variance = nf * scale * (scale - 1.0);
    let x = sf / nf;
    (
        nf * scale,
        sf * scale,
        objects_variance,
        objects_variance * x * x,
    )
}

/// z-value of a two-sided 95% normal confidence interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The 95% confidence interval `estimate ± 1.96·√variance` (normal approximation, which the central
/// limit theorem justifies once a stack has a handful of samples), with the lower end clamped at 0
/// because a heap cannot hold negative bytes.
pub fn confidence_interval_95(estimate: f64, variance: f64) -> (f64, f64) {
    let half = Z_95 * variance.max(0.0).sqrt();
    ((estimate - half).max(0.0), estimate + half)
}

/// One name's change between two profiles (`jeprof-compat diff`, the page's "what grew"), with
/// its 95% interval: `delta ± half_width`, where `half_width = Z_95·√(var_base + var_new)` (the
/// two sides' samples are independent, so their variances add).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// The function (or site), as the report names it.
    pub name: String,
    /// Its figure in the base (earlier) profile.
    pub base: f64,
    /// Its figure in the new (later) profile.
    pub new: f64,
    /// `new − base`.
    pub delta: f64,
    /// Half-width of the 95% interval of `delta`.
    pub half_width: f64,
}

impl Change {
    /// True when the 95% interval of the change excludes zero: the change is more than sampling
    /// noise (`diff`'s test, and the only changes the page colours).
    pub fn significant(&self) -> bool {
        self.delta.abs() > self.half_width
    }
}

/// Variance estimate for an entry whose only record is jeprof's `(n, s)` pair (dumps from real
/// jemalloc): assume its `n_in` samples all had the entry's average size `x = bytes/objects`, so the
/// estimate is `n_in·x²(1 − p)/p²` for bytes and `n_in·(1 − p)/p²` for objects. Exact for a stack of
/// one size class; for mixed stacks it is what the dump still allows.
pub fn variance_from_average(objects: f64, bytes: f64, period: f64) -> (f64, f64) {
    if !(objects > 0.0 && bytes > 0.0) || period <= 0.0 {
        return (0.0, 0.0);
    }
    let x = bytes / objects;
    let p = sample_probability(x, period);
    let samples = objects * p;
    let q = samples * (1.0 - p) / (p * p);
    (q, q * x * x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_jeprof_unbias_is_identity_before_rounding() {
        for &(c, b, r) in &[
            (1_000_000.0, 8_000_000.0, 1_048_576.0),
            (1.0, 8.0 * 1_048_576.0, 1_048_576.0),
            (3.7, 12345.0, 524_288.0),
        ] {
            let (n, s) = encode(c, b, r);
            // Apply jeprof's formula on the real-valued pair.
            let f = 1.0 / sample_probability(s / n, r);
            assert!(((n * f) - c).abs() / c < 1e-12, "objects {c} -> {}", n * f);
            assert!(((s * f) - b).abs() / b < 1e-12, "bytes {b} -> {}", s * f);
        }
    }

    #[test]
    fn jeprof_unbias_matches_documented_jeprof_figures() {
        // docs/design.md §3: `1: 262144` at R = 2^19 prints 666237 B and 2 objects (2.54 truncated).
        let (n, s) = jeprof_unbias(1, 262_144, 524_288);
        assert_eq!(s as u64, 666_237);
        assert_eq!(n as u64, 2);
        // heap_v2/1 real dump line `1000: 7997` prints 7999 B.
        assert_eq!(jeprof_unbias(1000, 7997, 1).1 as u64, 7999);
        // heap_v2/0 and n == 0 are left unscaled.
        assert_eq!(jeprof_unbias(3, 300, 0), (3.0, 300.0));
        assert_eq!(jeprof_unbias(0, 1000, 524_288), (0.0, 1000.0));
    }

    #[test]
    fn single_sample_weight_is_what_jeprof_prints_for_a_one_sample_entry() {
        let w = SampleWeight::of(1_048_576.0, 524_288.0);
        let (n, s) = jeprof_unbias(1, 1_048_576, 524_288);
        assert!((w.objects - n).abs() < 1e-9 && (w.bytes - s).abs() < 1e-6);
    }

    #[test]
    fn an_allocation_is_weighted_by_its_requested_size_and_counted_at_its_usable_size() {
        let w = SampleWeight::of_allocation(10.0, 16.0, 100.0);
        let p = 1.0 - (-10.0f64 / 100.0).exp();
        assert!((w.objects - 1.0 / p).abs() < 1e-9);
        assert!((w.bytes - 16.0 / p).abs() < 1e-9);
        assert!((w.objects_variance - (1.0 - p) / (p * p)).abs() < 1e-9);
        assert!((w.bytes_variance - 256.0 * (1.0 - p) / (p * p)).abs() < 1e-6);
        assert_eq!(
            SampleWeight::of(16.0, 100.0),
            SampleWeight::of_allocation(16.0, 16.0, 100.0)
        );
    }

    #[test]
    fn one_exp_decoding_agrees_with_the_separate_formulas() {
        for &(n, s, r) in &[
            (1u64, 262_144u64, 524_288u64),
            (7, 981, 524_288),
            (1000, 7997, 1),
        ] {
            let (c, b, vc, vb) = jeprof_unbias_with_variance(n, s, r);
            assert_eq!((c, b), jeprof_unbias(n, s, r));
            let (wc, wb) = variance_from_average(c, b, r as f64);
            assert!((vc - wc).abs() <= 1e-6 * wc.max(1e-300), "{vc} vs {wc}");
            assert!((vb - wb).abs() <= 1e-6 * wb.max(1e-300), "{vb} vs {wb}");
        }
    }

    #[test]
    fn interval_never_goes_negative_and_covers_the_estimate() {
        let (lo, hi) = confidence_interval_95(10.0, 1e6);
        assert_eq!(lo, 0.0);
        assert!(hi > 10.0);
    }
}
