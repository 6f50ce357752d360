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

use std::cmp::Ordering;

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
        if let Some(pair) = target.best_single(n as u64, n_c, s_c) {
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
    ///
    /// The root is found from a guess, not from `s = 1`: the pair `(n, n·S/C·p)` with the
    /// target's own average is on it for small objects (`C' ≈ n²R/s`, `S' ≈ nR`) and for large
    /// ones (`C' ≈ n`, `S' ≈ s`), so one secant step from there lands within a few units of it
    /// and [`first_true`] brackets and bisects the rest: a few evaluations of `d` (one `exp`
    /// each) where a bisection from 1 took about 2·log₂ s, 50 for a stack of 10 MB.
    fn best_single(&self, n: u64, n_c: f64, s_c: f64) -> Option<Pair> {
        let d = |s: u64| {
            let (c, b) = self.point(Pair { n, s });
            b / self.bytes - c / self.objects
        };
        let guess = (s_c * n as f64 / n_c).round().clamp(1.0, EXACT_LIMIT);
        let (at, next) = (d(guess as u64), d(guess as u64 + 1));
        let secant = guess - at / (next - at);
        let start = if secant.is_finite() {
            secant.round().clamp(1.0, EXACT_LIMIT)
        } else {
            guess
        };
        // The crossing the doubling search from 1 looked for: the first s (up to 2⁵³) where
        // `d(s) < 0` fails.
        let not_below = |s: u64| d(s).partial_cmp(&0.0) != Some(Ordering::Less);
        let hi = first_true(not_below, start as u64, EXACT_LIMIT as u64)?;
        let lo = hi.saturating_sub(1).max(1);
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
        let mut consider = |pairs: &[Pair], err: f64| -> bool {
            if best.as_ref().is_none_or(|(_, e)| err < *e) {
                best = Some((pairs.to_vec(), err));
            }
            err <= GOOD_ENOUGH
        };
        // With no room for a bulk entry (n_c in [2, 3)), two adjusters carry everything.
        if whole == 2 {
            if let Some(adj) = adjusters(self.objects, self.bytes, r, f64::NAN) {
                for pairs in rounded_adjusters(adj) {
                    let err = relative_error(&pairs, self.objects, self.bytes, self.period);
                    consider(&pairs, err);
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
            // finest steps. Find it (a secant guess, `boundary_guess`, then `first_true`: about 6
            // residuals where a bisection from 0 took log₂ s₁, each an `h_inverse`), then try a few above it.
            let top = (bulk_n as f64 * x).round().max(1.0);
            if top >= EXACT_LIMIT {
                continue;
            }
            let top = top as u64;
            let margin = |s1: u64| {
                let (c, b) = residual(Pair { n: bulk_n, s: s1 });
                reach_margin(c, b, r)
            };
            let top_margin = margin(top);
            if top_margin.partial_cmp(&0.0) != Some(Ordering::Greater) {
                continue;
            }
            let lowest = first_true(
                |s1| margin(s1) > 0.0,
                boundary_guess(top, top_margin, bulk_n, r, margin),
                top,
            )
            .unwrap_or(top);
            let mut previous = f64::NAN;
            for step in 0..6 {
                let bulk = Pair {
                    n: bulk_n,
                    s: lowest + step,
                };
                let (c, b) = residual(bulk);
                let Some(adj) = adjusters(c, b, r, previous) else {
                    continue;
                };
                previous = adj.0;
                let bulk_point = self.point(bulk);
                for [second, third] in rounded_adjusters(adj) {
                    let err = self.split_error(bulk_point, second, third);
                    if consider(&[bulk, second, third], err) {
                        return best;
                    }
                }
            }
        }
        best
    }
}

impl Target {
    /// [`relative_error`] of a bulk entry (its jeprof figures `bulk`, computed once for the four
    /// roundings of its adjusters) and two adjusters: the same sums in the same order.
    fn split_error(&self, bulk: (f64, f64), second: Pair, third: Pair) -> f64 {
        let (mut c, mut s) = (0.0, 0.0);
        for (pc, ps) in [bulk, self.point(second), self.point(third)] {
            c += pc;
            s += ps;
        }
        rel(c, self.objects).max(rel(s, self.bytes))
    }
}

/// The smallest `s` in `[1, limit]` for which `holds(s)`, for a `holds` that is false and then true
/// as `s` rises (`None` when it does not hold at `limit`), searched from `guess`: steps doubling
/// away from it bracket the change, then bisection. About `2·log₂|answer − guess| + 2` calls, where a
/// bisection over the whole range takes `log₂ limit` (the answer is the same: the one change).
fn first_true(mut holds: impl FnMut(u64) -> bool, guess: u64, limit: u64) -> Option<u64> {
    let limit = limit.max(1);
    let guess = guess.clamp(1, limit);
    // Invariant: `holds(hi)`, and `lo` (0 meaning below 1) does not hold.
    let (mut lo, mut hi);
    let mut step = 1u64;
    if holds(guess) {
        hi = guess;
        loop {
            if hi == 1 {
                return Some(1);
            }
            let probe = hi.saturating_sub(step).max(1);
            if holds(probe) {
                hi = probe;
                step = step.saturating_mul(2);
            } else {
                lo = probe;
                break;
            }
        }
    } else {
        lo = guess;
        loop {
            if lo == limit {
                return None;
            }
            let probe = lo.saturating_add(step).min(limit);
            if holds(probe) {
                hi = probe;
                break;
            }
            lo = probe;
            step = step.saturating_mul(2);
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// A guess at the smallest bulk `s₁` whose residual two adjusters still reach (where `margin`
/// turns positive), from the margin at `top` (positive). Lowering `s₁` moves objects into the bulk
/// `(n₁, s₁)`, whose jeprof objects are `v = n₁·f(s₁/n₁)`, and the adjusters' reach moves little
/// beside that, so the margin is nearly linear in `v` (in `1/s₁` for small objects, where
/// `v ≈ n₁²R/s₁`; in `e^(−s₁/(n₁R))` for large ones): secant steps in `v`, from `top` and `min(top/2, 2·n₁R)` (above
/// an average of 2R the margin is flat) then from the last two points, `s₁ = −n₁R·ln(1 − n₁/v)` back, land within a few units of the
/// boundary in a few steps (at most [`SECANT_STEPS`]), one margin each.
fn boundary_guess(
    top: u64,
    top_margin: f64,
    bulk_n: u64,
    r: f64,
    margin: impl Fn(u64) -> f64,
) -> u64 {
    if top <= 2 {
        return top;
    }
    let n1 = bulk_n as f64;
    let objects_of = |s1: u64| n1 * g(s1 as f64 / n1, r);
    let mut a = (objects_of(top), top_margin, top);
    // Not above an average of 2R: above it `v` is nearly `n₁` and the margin flat.
    let second = (top / 2).min((2.0 * n1 * r).round() as u64).max(1);
    let mut b = (objects_of(second), margin(second), second);
    for _ in 0..SECANT_STEPS {
        let v = a.0 + a.1 * (b.0 - a.0) / (a.1 - b.1);
        let guess = -n1 * r * (-n1 / v).ln_1p();
        if !(guess.is_finite() && guess >= 1.0) {
            break;
        }
        let next = (guess.round() as u64).min(top);
        if next == b.2 || next == a.2 {
            return next;
        }
        a = b;
        b = (objects_of(next), margin(next), next);
        if !b.1.is_finite() {
            break;
        }
    }
    b.2
}

/// Most secant steps [`boundary_guess`] takes.
const SECANT_STEPS: usize = 6;

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
    h_inverse_near(y, r, f64::NAN)
}

/// [`h_inverse`], its Newton steps started from `near` when that lies inside the bracket: the
/// adjusters' search solves for an `a₃` next to the one of its previous step, and a start that
/// close takes two or three steps where the bracket's middle took about ten.
fn h_inverse_near(y: f64, r: f64, near: f64) -> Option<f64> {
    if y <= r || !y.is_finite() {
        return None;
    }
    let (mut lo, mut hi) = ((y - r).max(0.0), y.min(2.0 * (y - r)));
    let mut a = if near > lo && near < hi {
        near
    } else {
        0.5 * (lo + hi)
    };
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

/// How far `(objects, bytes)` lies above the curve `2·P`: its objects less those of the symmetric
/// pair with those bytes. Two one-object entries can land exactly on it when this is positive (NaN
/// when no pair has those bytes).
fn reach_margin(objects: f64, bytes: f64, r: f64) -> f64 {
    match h_inverse(bytes / 2.0, r) {
        Some(symmetric) => objects - 2.0 * g(symmetric, r),
        None => f64::NAN,
    }
}

/// Real averages `(a₂, a₃)`, `a₂ ≤ a₃`, with `P(a₂) + P(a₃) = (objects, bytes)`, if the residual is
/// reachable by two one-object entries.
///
/// `near`: an `a₂` to start the search from (the previous bulk step's, a byte away), or NaN.
fn adjusters(objects: f64, bytes: f64, r: f64, near: f64) -> Option<(f64, f64)> {
    let symmetric = h_inverse(bytes / 2.0, r)?;
    // Reachable: above the curve `2·P` (see `reach_margin`).
    if objects <= 2.0 * g(symmetric, r) || objects.is_nan() {
        return None;
    }
    // Objects of the pair as a function of a₂ (a₃ fixed by the bytes); falls from +∞ to its
    // symmetric value, which is below the target (reachable), so there is one root below it. Each
    // `g` is computed once per average and reused for `h = a·g` and the slopes.
    let excess = |a2: f64| -> Option<f64> {
        let g2 = g(a2, r);
        let a3 = h_inverse(bytes - a2 * g2, r)?;
        Some(g2 + g(a3, r) - objects)
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
    let slopes = |a: f64, gv: f64| {
        let dg = -(-a / r).exp() / r * gv * gv;
        (dg, gv + a * dg)
    };
    let mut a2 = if near > lo && near < hi {
        near
    } else {
        (lo * hi).sqrt()
    };
    let mut a3 = f64::NAN;
    for _ in 0..100 {
        let g2 = g(a2, r);
        a3 = h_inverse_near(bytes - a2 * g2, r, a3)?;
        let g3 = g(a3, r);
        let e = g2 + g3 - objects;
        if e.abs() <= objects * 1e-13 {
            return Some((a2, a3));
        }
        if e > 0.0 {
            lo = a2;
        } else {
            hi = a2;
        }
        if hi / lo < 1.0 + 1e-13 {
            // a₂ is where this a₃ was solved for.
            return Some((a2, a3));
        }
        let ((dg2, dh2), (dg3, dh3)) = (slopes(a2, g2), slopes(a3, g3));
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
fn rounded_adjusters((a2, a3): (f64, f64)) -> impl Iterator<Item = [Pair; 2]> {
    let choices = |a: f64| [a.floor().max(1.0) as u64, a.ceil().max(1.0) as u64];
    let (c2, c3) = (choices(a2), choices(a3));
    c2.into_iter().flat_map(move |s2| {
        c3.into_iter()
            .map(move |s3| [Pair { n: 1, s: s2 }, Pair { n: 1, s: s3 }])
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
