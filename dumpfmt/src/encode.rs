//! Turning true unbiased figures into the integer `(n, s)` pairs of a dump, so that what jeprof computes
//! from them is as close to the truth as the format allows.
//!
//! # The problem
//! jeprof maps an entry `(n, s)` to the point `n·P(s/n)` where `P(a) = (f(a), a·f(a))` and
//! `f(a) = 1/(1 − e^(−a/R))`: objects and bytes. jemalloc's `prof_do_unbias` picks the real pair
//! `(n_c, s_c) = (C, S)·(1 − e^(−x/R))`, `x = S/C`, that lands exactly on the target `(C, S)`, then
//! rounds both to integers ([`Rounding::Nearest`]). For small objects `S ≈ n_c·R`, so the printed bytes
//! move in steps of about R per unit of `n`: a stack of 8-byte objects holding 8 MB at R = 1 MiB has
//! `n_c ≈ 7.6` and comes out several percent off, and the object count, which moves by about
//! `R/a²` per unit of `s`, is off by as much.
//!
//! # What we do instead ([`Rounding::Optimal`])
//! Two facts give room: jeprof *adds up* entries with identical stacks, and each entry has its own
//! average. A stack is written as
//! - one entry `(n, s)` when some integer pair already lands within [`SINGLE_ENTRY_ENOUGH`] of the target
//!   (always the case for large `n_c`; for each `n` next to `n_c`, `s` is found by bisection where the
//!   relative errors in objects and bytes cross, since objects fall and bytes rise with `s`), or else
//! - a *bulk* entry `(n₁, s₁)` with `n₁ ≤ ⌊n_c⌋ − 2` carrying most of the stack, plus two *adjusters*
//!   `(1, s₂)` and `(1, s₃)` that land exactly (before rounding) on what the bulk leaves:
//!   `P(a₂) + P(a₃) = T − n₁·P(s₁/n₁)`. Given `a₂`, bytes fix `a₃` (h(a) = a·f(a) rises from R to ∞);
//!   objects then fall monotonically in `a₂` up to the symmetric point `a₂ = a₃`, so bisection finds
//!   the root whenever the residual lies above the curve `2·P` (which is why `n₁ ≤ n_c − 2`: by
//!   convexity a point is reachable by `k` entries only when `k ≤ n_c`). Adjusters with larger
//!   averages move objects in finer steps (`R/a²` per byte of `s`), so several bulk averages are
//!   tried and the best integer neighbourhood is kept.
//!
//! Every entry costs at least `n·R` printed bytes and `n` objects, so a stack with `n_c < 2` (less than
//! about 2R in it, or a single large sample) is written as one entry. For the stacks that matter for
//! accuracy (at least 2R bytes) the measured worst errors are in the crate docs and `fixtures/`.

use crate::math::{self, jeprof_unbias};

/// How to turn real-valued figures into the integers of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rounding {
    /// Search for entries whose jeprof figures are closest to the truth (the default).
    #[default]
    Optimal,
    /// jemalloc's `prof_do_unbias`: round `(n_c, s_c)` to the nearest integers, one entry per stack.
    Nearest,
}

/// One `n: s` pair as it will be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The object count jeprof reads.
    pub n: u64,
    /// The byte count jeprof reads.
    pub s: u64,
}

/// The relative error at which the search for a split stops.
pub const GOOD_ENOUGH: f64 = 1e-5;

/// The relative error below which a single entry is kept without searching for a split: ten times
/// inside the 0.1% that matters, and it spares the search (about 14 µs a stack) for the many large
/// stacks of merged profiles, whose single entries land within this.
pub const SINGLE_ENTRY_ENOUGH: f64 = 1e-4;

/// Largest integer magnitude that f64 holds exactly; beyond it the search is pointless.
const EXACT_LIMIT: f64 = 9_007_199_254_740_992.0;

/// The relative error of jeprof's figures for `pairs` against the target `(objects, bytes)`:
/// `max(|C' − C|/C, |S' − S|/S)`, where `C'`, `S'` are jeprof's sums over the entries.
pub fn relative_error(pairs: &[Pair], objects: f64, bytes: f64, period: u64) -> f64 {
    let (mut c, mut s) = (0.0, 0.0);
    for p in pairs {
        let (pc, ps) = jeprof_unbias(p.n, p.s, period);
        c += pc;
        s += ps;
    }
    rel(c, objects).max(rel(s, bytes))
}

fn rel(got: f64, want: f64) -> f64 {
    if want == 0.0 {
        if got == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (got - want).abs() / want
    }
}

/// The entries to write for a true unbiased pair `(objects, bytes)` at header period `period`.
/// Returns an empty vector when there is nothing to write (either figure zero or negative).
pub fn encode_pair(objects: f64, bytes: f64, period: u64, rounding: Rounding) -> Vec<Pair> {
    if !(objects > 0.0 && bytes > 0.0 && objects.is_finite() && bytes.is_finite()) {
        return Vec::new();
    }
    let (n_c, s_c) = math::encode(objects, bytes, period as f64);
    let nearest = nearest_pair(n_c, s_c);
    if rounding == Rounding::Nearest || period == 0 || s_c >= EXACT_LIMIT {
        return nearest.into_iter().collect();
    }
    let mut best: Vec<Pair> = nearest.into_iter().collect();
    let mut best_err = relative_error(&best, objects, bytes, period);
    if best_err <= GOOD_ENOUGH {
        return best;
    }
    let target = Target {
        objects,
        bytes,
        period,
    };
    for n in [n_c.floor(), n_c.ceil()] {
        if n < 1.0 {
            continue;
        }
        if let Some(pair) = target.best_single(n as u64) {
            let err = relative_error(&[pair], objects, bytes, period);
            if err < best_err {
                best = vec![pair];
                best_err = err;
            }
        }
    }
    if best_err <= SINGLE_ENTRY_ENOUGH || n_c < 2.0 {
        return best;
    }
    if let Some((pairs, err)) = target.best_split(n_c) {
        if err < best_err {
            best = pairs;
        }
    }
    best
}

/// jemalloc's rounding, with the one repair it needs: never `n > 0, s = 0` (jeprof divides by zero).
fn nearest_pair(n_c: f64, s_c: f64) -> Option<Pair> {
    let n = saturating_round(n_c);
    let s = saturating_round(s_c);
    match (n, s) {
        (_, 0) => None,
        // `0: s` is printed unscaled by jeprof; one object is closer to what jemalloc meant.
        (0, s) => Some(Pair { n: 1, s }),
        (n, s) => Some(Pair { n, s }),
    }
}

fn saturating_round(v: f64) -> u64 {
    // `as` saturates at u64::MAX and maps NaN to 0, which is what a dump can hold.
    v.round() as u64
}

struct Target {
    objects: f64,
    bytes: f64,
    period: u64,
}

impl Target {
    fn point(&self, p: Pair) -> (f64, f64) {
        jeprof_unbias(p.n, p.s, self.period)
    }

    /// For a fixed `n`, the `s` whose jeprof figures are closest to the target. Objects fall and
    /// bytes rise with `s`, so `d(s) = S'/S − C'/C` rises, and the best `s` is next to its root.
    fn best_single(&self, n: u64) -> Option<Pair> {
        let d = |s: u64| {
            let (c, b) = self.point(Pair { n, s });
            b / self.bytes - c / self.objects
        };
        let (mut lo, mut hi) = (1u64, 1u64);
        while d(hi) < 0.0 {
            lo = hi;
            hi = hi.checked_mul(2)?;
            if hi as f64 > EXACT_LIMIT {
                return None;
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if d(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        [lo, hi].into_iter().map(|s| Pair { n, s }).min_by(|a, b| {
            let ea = relative_error(&[*a], self.objects, self.bytes, self.period);
            let eb = relative_error(&[*b], self.objects, self.bytes, self.period);
            ea.total_cmp(&eb)
        })
    }

    /// A bulk entry plus two adjusters; see the module docs.
    fn best_split(&self, n_c: f64) -> Option<(Vec<Pair>, f64)> {
        let r = self.period as f64;
        let x = self.bytes / self.objects;
        let whole = n_c.floor() as u64;
        let mut best: Option<(Vec<Pair>, f64)> = None;
        let mut consider = |pairs: Vec<Pair>| -> bool {
            let err = relative_error(&pairs, self.objects, self.bytes, self.period);
            if best.as_ref().is_none_or(|(_, e)| err < *e) {
                best = Some((pairs, err));
            }
            err <= GOOD_ENOUGH
        };
        // With no room for a bulk entry (n_c in [2, 3)), two adjusters carry everything.
        if whole == 2 {
            if let Some(adj) = adjusters(self.objects, self.bytes, r) {
                for pairs in rounded_adjusters(adj) {
                    consider(pairs);
                }
            }
            return best;
        }
        // Residual left to the adjusters by a bulk entry `(bulk_n, s1)`.
        let residual = |bulk: Pair| {
            let (bc, bb) = self.point(bulk);
            (self.objects - bc, self.bytes - bb)
        };
        // A bulk of n₁ ≤ n_c − 3 leaves the adjusters at least about 3R of bytes, so their averages
        // (and so their object granularity) are comfortable; n_c − 2 is the fallback.
        for bulk_n in [whole.saturating_sub(3), whole.saturating_sub(2)] {
            if bulk_n == 0 {
                continue;
            }
            // At s₁ = n₁·x the residual is (n_c − n₁)·P(x), strictly reachable. Lowering s₁ moves
            // objects from the adjusters into the bulk; the smallest s₁ that still leaves a reachable
            // residual leaves the adjusters the fewest objects, hence the largest averages and the
            // finest steps. Find it by bisection, then try a few above it.
            let mut hi = (bulk_n as f64 * x).round().max(1.0);
            if hi >= EXACT_LIMIT {
                continue;
            }
            let reachable = |s1: f64| {
                let (c, b) = residual(Pair {
                    n: bulk_n,
                    s: s1 as u64,
                });
                reachable_by_two(c, b, r)
            };
            if !reachable(hi) {
                continue;
            }
            let mut lo = 0.0;
            while hi - lo > 1.0 {
                let mid = ((lo + hi) * 0.5).floor();
                if mid >= 1.0 && reachable(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            for step in 0..6 {
                let bulk = Pair {
                    n: bulk_n,
                    s: hi as u64 + step,
                };
                let (c, b) = residual(bulk);
                let Some(adj) = adjusters(c, b, r) else {
                    continue;
                };
                for mut pairs in rounded_adjusters(adj) {
                    pairs.insert(0, bulk);
                    if consider(pairs) {
                        return best;
                    }
                }
            }
        }
        best
    }
}

/// `f(a)` and `h(a) = a·f(a)`: jeprof's objects and bytes for a one-object entry of average `a`.
fn g(a: f64, r: f64) -> f64 {
    1.0 / math::sample_probability(a, r)
}

fn h(a: f64, r: f64) -> f64 {
    a * g(a, r)
}

/// The `a` with `h(a) = y`, for `y > R` (h rises from R at 0 to infinity).
///
/// Bracket: `a ≤ h(a) ≤ a + R` and `h(a) ≥ R + a/2` give `max(y − R, 0) ≤ a ≤ min(y, 2(y − R))`;
/// Newton steps (`h' = f − (a/R)·e^(−a/R)·f²`) inside that bracket, bisecting when a step leaves it.
fn h_inverse(y: f64, r: f64) -> Option<f64> {
    if y <= r || !y.is_finite() {
        return None;
    }
    let (mut lo, mut hi) = ((y - r).max(0.0), y.min(2.0 * (y - r)));
    let mut a = 0.5 * (lo + hi);
    for _ in 0..60 {
        let e = (-a / r).exp();
        let f = 1.0 / (1.0 - e);
        let value = a * f - y;
        if value.abs() <= y * 1e-15 {
            return Some(a);
        }
        if value < 0.0 {
            lo = a;
        } else {
            hi = a;
        }
        let slope = f - (a / r) * e * f * f;
        let next = a - value / slope;
        a = if next > lo && next < hi && slope > 0.0 {
            next
        } else {
            0.5 * (lo + hi)
        };
        if hi - lo <= hi * 1e-15 {
            break;
        }
    }
    Some(a)
}

/// Whether two one-object entries can land exactly on `(objects, bytes)`: the point must lie above
/// the curve `2·P`, i.e. hold at least the objects of the symmetric pair with those bytes.
fn reachable_by_two(objects: f64, bytes: f64, r: f64) -> bool {
    match h_inverse(bytes / 2.0, r) {
        Some(symmetric) => objects > 2.0 * g(symmetric, r),
        None => false,
    }
}

/// Real averages `(a₂, a₃)`, `a₂ ≤ a₃`, with `P(a₂) + P(a₃) = (objects, bytes)`, if the residual is
/// reachable by two one-object entries.
fn adjusters(objects: f64, bytes: f64, r: f64) -> Option<(f64, f64)> {
    if !reachable_by_two(objects, bytes, r) {
        return None;
    }
    let symmetric = h_inverse(bytes / 2.0, r)?;
    // Objects of the pair as a function of a₂ (a₃ fixed by the bytes); falls from +∞ to its
    // symmetric value, which is below the target (reachable), so there is one root below it.
    let excess = |a2: f64| -> Option<f64> {
        let a3 = h_inverse(bytes - h(a2, r), r)?;
        Some(g(a2, r) + g(a3, r) - objects)
    };
    // g(a₂) alone exceeds the target once a₂ < R/objects·(1 − …); start the bracket well below.
    let mut lo = (r / objects * 0.5).min(symmetric * 0.5).max(1e-300);
    while excess(lo)? < 0.0 {
        lo *= 0.5;
        if lo < 1e-300 {
            return None;
        }
    }
    let mut hi = symmetric;
    // Safeguarded Newton on a₂. With a₃(a₂) defined by h(a₃) = bytes − h(a₂),
    // d/da₂ [g(a₂) + g(a₃)] = g'(a₂) − g'(a₃)·h'(a₂)/h'(a₃), where g' = −(1/R)·e^(−a/R)·g² and
    // h' = g + a·g'. Steps that leave the bracket fall back to a geometric bisection.
    let slopes = |a: f64| {
        let gv = g(a, r);
        let dg = -(-a / r).exp() / r * gv * gv;
        (dg, gv + a * dg)
    };
    let mut a2 = (lo * hi).sqrt();
    for _ in 0..100 {
        let a3 = h_inverse(bytes - h(a2, r), r)?;
        let e = g(a2, r) + g(a3, r) - objects;
        if e.abs() <= objects * 1e-13 {
            return Some((a2, a3));
        }
        if e > 0.0 {
            lo = a2;
        } else {
            hi = a2;
        }
        if hi / lo < 1.0 + 1e-13 {
            break;
        }
        let ((dg2, dh2), (dg3, dh3)) = (slopes(a2), slopes(a3));
        let next = a2 - e / (dg2 - dg3 * dh2 / dh3);
        a2 = if next > lo && next < hi {
            next
        } else {
            (lo * hi).sqrt()
        };
    }
    let a3 = h_inverse(bytes - h(a2, r), r)?;
    Some((a2, a3))
}

/// The four integer roundings of a pair of adjuster averages (each at least 1 byte).
fn rounded_adjusters((a2, a3): (f64, f64)) -> impl Iterator<Item = Vec<Pair>> {
    let choices = |a: f64| [a.floor().max(1.0) as u64, a.ceil().max(1.0) as u64];
    let (c2, c3) = (choices(a2), choices(a3));
    c2.into_iter().flat_map(move |s2| {
        c3.into_iter()
            .map(move |s3| vec![Pair { n: 1, s: s2 }, Pair { n: 1, s: s3 }])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1_048_576.0;

    fn both(objects: f64, bytes: f64, period: u64) -> (f64, f64) {
        let opt = encode_pair(objects, bytes, period, Rounding::Optimal);
        let near = encode_pair(objects, bytes, period, Rounding::Nearest);
        (
            relative_error(&opt, objects, bytes, period),
            relative_error(&near, objects, bytes, period),
        )
    }

    #[test]
    fn small_objects_at_large_period_come_out_within_a_thousandth() {
        // docs/design.md §2 and §4: one million 8-byte objects at R = 1 MiB.
        let (opt, near) = both(1_000_000.0, 8_000_000.0, 1 << 20);
        assert!(opt < 1e-3, "optimal error {opt}");
        assert!(
            near > 1e-2,
            "plain rounding should be off by percents, got {near}"
        );
    }

    #[test]
    fn optimal_is_never_worse_than_plain_rounding() {
        let mut seed = 0x2545F4914F6CDD1Du64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let size = 8.0 * (1.0 + (seed % 1_000_000) as f64);
            let objects = 0.5 + ((seed >> 20) % 100_000) as f64 / 7.0;
            let (opt, near) = both(objects, objects * size, 1 << 19);
            assert!(
                opt <= near + 1e-12,
                "objects {objects} size {size}: {opt} > {near}"
            );
        }
    }

    #[test]
    fn one_large_sample_is_exact() {
        let w = math::SampleWeight::of(3.0 * MIB, 524_288.0);
        let (opt, _) = both(w.objects, w.bytes, 524_288);
        assert!(opt < 1e-9, "{opt}");
    }

    #[test]
    fn nothing_is_written_for_zero_and_never_objects_without_bytes() {
        assert!(encode_pair(0.0, 0.0, 524_288, Rounding::Optimal).is_empty());
        assert!(encode_pair(3.0, 0.0, 524_288, Rounding::Optimal).is_empty());
        for p in encode_pair(1e-6, 1e-6, 524_288, Rounding::Nearest) {
            assert!(p.s > 0);
        }
    }
}
