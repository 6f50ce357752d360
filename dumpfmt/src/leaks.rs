//! Leak suspects from one process's series of heap profiles: which sites' live bytes are *still
//! growing*, with how sure we are of it.
//!
//! # The question
//! A leak is memory that keeps being added and is never given back. A site whose live bytes grew
//! once and then stayed (a store filled at warm-up), rise and fall (a cache that fills and
//! empties) or rose and fell once (a burst) is not one, though a diff of two well-chosen dumps
//! says otherwise. What separates them is the *floor*: the least the site holds from some moment
//! on. A leak's floor keeps rising; a cache's floor is its empty level; a burst's floor never
//! moved; a warm-up store's floor stopped rising.
//!
//! # The test
//! The recent part of the series (the *window*, the last half of its time span by default) is cut
//! into `steps` equal spans whose ends are the checkpoint dumps `c₀ < c₁ < … < c_K` (the first dump
//! at or after each span's start, and the last dump). A site is a suspect when, for every step
//! `k`, *every* dump `j` from `c_{k+1}` on holds significantly more than `c_k` did:
//!
//! ```text
//! H₀: for some k and some j ≥ c_{k+1}, live(j) ≤ live(c_k)        (the floor stopped rising)
//! p  = max over those (k, j) of  P(Z ≥ (ŷ_j − ŷ_{c_k}) / sd_{c_k, j})
//! ```
//!
//! This is an intersection–union test: the site is declared growing only if each of the one-sided
//! tests rejects, and then the largest of their p-values is a valid p-value for `H₀` with no
//! correction for their number (Berger, 1982). Across sites the false discovery rate is held at
//! a chosen level with Benjamini–Hochberg ([`benjamini_hochberg`]), valid for independent or
//! positively dependent p-values, which sampling makes them (a sample belongs to one stack).
//!
//! # The variance of a difference within one process
//! The dumps of one process are not independent points: a sampled object that stays live is in
//! every later dump, with the same weight. For two dumps `a` before `b`,
//!
//! ```text
//! Var(ŷ_b − ŷ_a) = V_a + V_b − 2·C,   C = the variance carried by the sampled objects live in both
//! ```
//!
//! `C` is not in a dump, but it is bounded below from the counts: of the `n_b` samples live at `b`,
//! at most `A_b − A_a` were allocated after `a` (the dumps' cumulative sampled allocations, the
//! bracketed pair of a heap_v2 line), so at least `n_b − (A_b − A_a)` were already live at `a`. Each
//! carries about the per-sample variance of its site (`V/n`; exact for a site of one size class,
//! the smaller of the two dumps' figures is taken). Using that lower bound of `C` gives an upper
//! bound of the variance, so the test stays valid (conservative) however the site frees, and it is
//! exact for a pure leak (nothing freed: `Var = V_b − V_a`, only the new samples' noise). Without
//! the cumulative figures (jemalloc without `prof_accum`), `C = 0`: valid, less powerful. Every
//! covariance between dumps is `≥ 0` (two dumps share samples, never oppose them), so `C = 0` is
//! always an upper bound.
//!
//! # The figures of a suspect
//! - **rate**: `(ŷ_last − ŷ_{c₀}) / (t_last − t_{c₀})`, with the 95% interval from the same
//!   variance bound;
//! - **live now**: the last dump's estimate and its interval;
//! - **started**: walking back from `c₀`, the earliest dump from which every dump one step
//!   (`(t_last − t_{c₀}) / K`) or more later held more; then, since that looks a step ahead, the
//!   lowest point from there to `c₀`: where the floor began the rise still going on.

use crate::error::Error;
use crate::math::Z_95;
use crate::model::Counts;

/// One site's figures in one dump. The default is a site with nothing in the dump: no bytes, no
/// samples, none allocated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Live bytes (unbiased estimate).
    pub bytes: f64,
    /// Variance of `bytes`.
    pub variance: f64,
    /// Sampled live objects (jeprof's `n`, before scaling).
    pub samples: f64,
    /// Sampled objects allocated since the profile started, freed ones included; `None` when the
    /// dump does not count them (all its accumulated figures are zero).
    pub allocated_samples: Option<f64>,
}

impl Default for Point {
    fn default() -> Point {
        Point {
            bytes: 0.0,
            variance: 0.0,
            samples: 0.0,
            allocated_samples: Some(0.0),
        }
    }
}

impl Point {
    /// A site's point from its counts in a dump of period `period`. `accumulates`: the dump counts
    /// allocations (some entry has a non-zero accumulated figure).
    pub fn of_counts(counts: &Counts, period: u64, accumulates: bool) -> Point {
        let period = period as f64;
        let samples = |objects: f64, bytes: f64| crate::math::encode(objects, bytes, period).0;
        Point {
            bytes: counts.inuse.bytes,
            variance: counts.inuse.bytes_variance,
            samples: samples(counts.inuse.objects, counts.inuse.bytes),
            allocated_samples: accumulates
                .then(|| samples(counts.accum.objects, counts.accum.bytes)),
        }
    }

    /// Adds another stack's point (a site made of several stacks).
    pub fn add(&mut self, other: &Point) {
        self.bytes += other.bytes;
        self.variance += other.variance;
        self.samples += other.samples;
        self.allocated_samples = match (self.allocated_samples, other.allocated_samples) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
}

/// How suspects are found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeakOptions {
    /// The recent part of the series that must keep growing, as a fraction of its time span
    /// (`0 < window ≤ 1`).
    pub window: f64,
    /// How many consecutive steps of the window the floor must rise over (`≥ 2`).
    pub steps: usize,
    /// The false discovery rate over all sites (`0 < fdr < 1`).
    pub fdr: f64,
}

impl Default for LeakOptions {
    fn default() -> LeakOptions {
        LeakOptions {
            window: 0.5,
            steps: 2,
            fdr: 0.05,
        }
    }
}

impl LeakOptions {
    /// Checks the options' ranges.
    pub fn validate(&self) -> Result<(), Error> {
        let problem = if !(self.window > 0.0 && self.window <= 1.0) {
            Some(format!("the window must be in (0, 1], got {}", self.window))
        } else if self.steps < 2 {
            Some(format!("the steps must be at least 2, got {}", self.steps))
        } else if !(self.fdr > 0.0 && self.fdr < 1.0) {
            Some(format!(
                "the false discovery rate must be in (0, 1), got {}",
                self.fdr
            ))
        } else {
            None
        };
        problem.map_or(Ok(()), |p| Err(Error::LeakTest(p)))
    }
}

/// Which dumps of a series the test compares: shared by every site of the series.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    times: Vec<f64>,
    /// Indexes of the checkpoint dumps `c₀ < … < c_K`, the last one the series' last dump.
    checkpoints: Vec<usize>,
    /// The time one step spans.
    step: f64,
}

impl Plan {
    /// The plan for dumps taken at `times` (seconds, ascending; equal times are allowed, the
    /// order given is kept). Fails when the window holds fewer than three distinct checkpoints.
    pub fn new(times: &[f64], options: &LeakOptions) -> Result<Plan, Error> {
        options.validate()?;
        let ordered = |w: &[f64]| w[0].partial_cmp(&w[1]).is_some_and(|o| o.is_le());
        if !times.windows(2).all(ordered) || times.iter().any(|t| !t.is_finite()) {
            return Err(Error::LeakTest(
                "the dumps' times must be finite and in ascending order".into(),
            ));
        }
        if times.len() < 3 {
            let n = times.len();
            return Err(Error::LeakTest(format!(
                "{n} dump{}: the test reads one process's series of dumps, at least 3 and better a \
                 dozen or more (jemalloc's `lg_prof_interval`, the shim's `dump_interval`), and \
                 names what kept growing over it",
                if n == 1 { "" } else { "s" }
            )));
        }
        let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
            return Err(Error::LeakTest("no dumps".into()));
        };
        let start = last - options.window * (last - first);
        let mut steps = options.steps;
        loop {
            let step = (last - start) / steps as f64;
            let mut checkpoints: Vec<usize> = (0..steps)
                .map(|k| {
                    let at = start + step * k as f64;
                    times
                        .iter()
                        .position(|&t| t >= at)
                        .unwrap_or(times.len() - 1)
                })
                .collect();
            checkpoints.push(times.len() - 1);
            checkpoints.dedup();
            if checkpoints.len() == steps + 1 && step > 0.0 {
                return Ok(Plan {
                    times: times.to_vec(),
                    checkpoints,
                    step,
                });
            }
            if steps == 2 {
                let inside = times.iter().filter(|&&t| t >= start).count();
                return Err(Error::LeakTest(format!(
                    "the window (the last {:.0}% of the series' time span) holds {inside} dumps at \
                     {} distinct times; the test needs at least 3, spread over it: take dumps \
                     more often or widen the window",
                    options.window * 100.0,
                    {
                        let mut distinct: Vec<f64> =
                            times.iter().copied().filter(|&t| t >= start).collect();
                        distinct.dedup();
                        distinct.len()
                    }
                )));
            }
            steps -= 1;
        }
    }

    /// The number of dumps.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Never: a plan holds at least three dumps.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The dumps' times.
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// The checkpoint dumps' indexes.
    pub fn checkpoints(&self) -> &[usize] {
        &self.checkpoints
    }

    /// The steps actually used (fewer than asked when the window holds few dumps).
    pub fn steps(&self) -> usize {
        self.checkpoints.len() - 1
    }
}

/// One site's trend over a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    /// The test's p-value (small: the floor kept rising over every step).
    pub p_value: f64,
    /// Growth over the window, bytes per second, and its 95% interval.
    pub rate: f64,
    /// Lower end of the rate's 95% interval.
    pub rate_low: f64,
    /// Upper end of the rate's 95% interval.
    pub rate_high: f64,
    /// Live bytes at the last dump.
    pub live: f64,
    /// Variance of `live`.
    pub live_variance: f64,
    /// When the current rise began (a dump's time).
    pub started: f64,
}

impl Trend {
    /// Seconds from the last dump until a heap of `now` bytes reaches `limit` growing at this
    /// site's rate: `(estimate, soonest, latest)`, the last `None` (never) when the rate's interval
    /// reaches zero. `None` when the rate is not positive.
    pub fn time_to(&self, now: f64, limit: f64) -> Option<(f64, f64, Option<f64>)> {
        if self.rate <= 0.0 {
            return None;
        }
        let room = (limit - now).max(0.0);
        let latest = (self.rate_low > 0.0).then(|| room / self.rate_low);
        Some((room / self.rate, room / self.rate_high, latest))
    }
}

/// The upper tail of the standard normal distribution, `P(Z ≥ z)`.
pub fn normal_upper_tail(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// What is below this fraction of the figures it comes from is rounding, not sampling: a dump
/// carries its estimates in jeprof's integers, which moves an unchanged site's bytes by parts in
/// 10⁷ from one dump to the next.
const ROUNDING: f64 = 1e-6;

/// An upper bound of `Var(ŷ_b − ŷ_a)` for dump `a` before dump `b` of one process (module docs).
pub fn difference_variance(a: &Point, b: &Point) -> f64 {
    let shared = match (a.allocated_samples, b.allocated_samples) {
        (Some(before), Some(after)) if after >= before && a.samples > 0.0 && b.samples > 0.0 => {
            // At least this many of b's samples were already live at a.
            let kept = (b.samples - (after - before)).clamp(0.0, a.samples);
            let per_sample = (a.variance / a.samples).min(b.variance / b.samples);
            kept * per_sample
        }
        _ => 0.0,
    };
    let bound = a.variance + b.variance - 2.0 * shared;
    if bound <= ROUNDING * (a.variance + b.variance) {
        0.0
    } else {
        bound
    }
}

/// `ŷ_b − ŷ_a`, zero when it is rounding ([`ROUNDING`]).
fn difference(a: &Point, b: &Point) -> f64 {
    let difference = b.bytes - a.bytes;
    if difference.abs() <= ROUNDING * a.bytes.abs().max(b.bytes.abs()) {
        0.0
    } else {
        difference
    }
}

/// `P(Z ≥ (ŷ_b − ŷ_a)/sd)`: the one-sided p-value of "b holds no more than a".
fn growth_p_value(a: &Point, b: &Point) -> f64 {
    let difference = difference(a, b);
    let variance = difference_variance(a, b);
    if variance > 0.0 {
        normal_upper_tail(difference / variance.sqrt())
    } else if difference > 0.0 {
        // No sampling noise in the difference (every sample shared, or exact figures).
        0.0
    } else {
        1.0
    }
}

/// The trend of one site whose figures in the plan's dumps are `series` (one point per dump, a
/// zero point where the site had nothing).
///
/// # Panics
/// If `series` is not as long as the plan.
pub fn trend(plan: &Plan, series: &[Point]) -> Trend {
    assert_eq!(series.len(), plan.len(), "one point per dump");
    let cps = &plan.checkpoints;
    let last = series.len() - 1;
    let mut p_value: f64 = 0.0;
    for k in 0..cps.len() - 1 {
        let base = &series[cps[k]];
        for later in &series[cps[k + 1]..] {
            p_value = p_value.max(growth_p_value(base, later));
            if p_value >= 1.0 {
                break;
            }
        }
    }
    let (from, to) = (&series[cps[0]], &series[last]);
    let span = plan.times[last] - plan.times[cps[0]];
    let half = Z_95 * difference_variance(from, to).sqrt();
    let growth = difference(from, to);
    Trend {
        p_value,
        rate: growth / span,
        rate_low: (growth - half) / span,
        rate_high: (growth + half) / span,
        live: to.bytes,
        live_variance: to.variance,
        started: plan.times[started(plan, series)],
    }
}

/// The earliest dump from which every dump at least one step later held more, walking back from
/// the first checkpoint (module docs).
fn started(plan: &Plan, series: &[Point]) -> usize {
    let n = series.len();
    // floor[i]: the least any dump from i on held.
    let mut floor = vec![f64::INFINITY; n + 1];
    for i in (0..n).rev() {
        floor[i] = floor[i + 1].min(series[i].bytes);
    }
    let rises = |i: usize| {
        let at = plan.times[i] + plan.step;
        let j = plan.times.partition_point(|&t| t < at);
        j < n && floor[j] > series[i].bytes
    };
    let mut start = plan.checkpoints[0];
    while start > 0 && rises(start - 1) {
        start -= 1;
    }
    // Seen one step ahead, the rise shows before it begins: it began at the lowest point (the
    // last, if several) between there and the first checkpoint.
    (start..=plan.checkpoints[0])
        .rev()
        .min_by(|&a, &b| series[a].bytes.total_cmp(&series[b].bytes))
        .unwrap_or(start)
}

/// Benjamini–Hochberg at false discovery rate `level`: which of `p_values` are discoveries. The
/// `m` p-values sorted ascending, the largest rank `k` with `p₍ₖ₎ ≤ k·level/m` and every p-value up
/// to it are.
pub fn benjamini_hochberg(p_values: &[f64], level: f64) -> Vec<bool> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let cutoff = order
        .iter()
        .enumerate()
        .rev()
        .find(|&(rank, &i)| p_values[i] <= (rank + 1) as f64 * level / m as f64)
        .map(|(rank, _)| rank + 1)
        .unwrap_or(0);
    let mut discovered = vec![false; m];
    for &i in &order[..cutoff] {
        discovered[i] = true;
    }
    discovered
}

/// `bytes` as the leak tables and charts print them, in binary units (`12.3 MiB`, powers of 1024,
/// as the settings and `--limit` take them; `512 B` below a KiB).
pub fn human_bytes(bytes: f64) -> String {
    const KIB: f64 = 1024.0;
    let magnitude = bytes.abs();
    if magnitude >= KIB * KIB * KIB {
        format!("{:.2} GiB", bytes / (KIB * KIB * KIB))
    } else if magnitude >= KIB * KIB {
        format!("{:.1} MiB", bytes / (KIB * KIB))
    } else if magnitude >= KIB {
        format!("{:.1} KiB", bytes / KIB)
    } else {
        format!("{bytes:.0} B")
    }
}

/// `seconds` as the leak tables print them: seconds below two minutes, minutes below two hours,
/// hours below two days, then days.
pub fn human_duration(seconds: f64) -> String {
    if seconds >= 2.0 * 86_400.0 {
        format!("{:.1} d", seconds / 86_400.0)
    } else if seconds >= 7_200.0 {
        format!("{:.1} h", seconds / 3_600.0)
    } else if seconds >= 120.0 {
        format!("{:.1} min", seconds / 60.0)
    } else {
        format!("{seconds:.1} s")
    }
}

/// The first columns of a leak table's header, rates per `unit` (`/h`): growth, live now and
/// started. One layout for every producer (`jeprof-compat leaks`, the shim's `/debug/pprof/leaks`);
/// each appends its own columns and the site's name.
pub fn table_header(unit: &str) -> String {
    format!(
        "{:>32}  {:>30}  {:<27}",
        format!("growth{unit} (95%)"),
        "live now (95%)",
        "started"
    )
}

/// A suspect's first columns under [`table_header`]: its growth (`trend`'s rate × `scale`) and
/// live bytes, each with its 95% interval, and `started` as the caller writes it.
pub fn table_row(trend: &Trend, scale: f64, started: &str) -> String {
    let growth = format!(
        "{} [{}, {}]",
        human_bytes(trend.rate * scale),
        human_bytes(trend.rate_low * scale),
        human_bytes(trend.rate_high * scale)
    );
    let (lo, hi) = crate::math::confidence_interval_95(trend.live, trend.live_variance);
    let live = format!(
        "{} [{}, {}]",
        human_bytes(trend.live),
        human_bytes(lo),
        human_bytes(hi)
    );
    format!("{growth:>32}  {live:>30}  {started:<27}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(bytes: f64, samples: f64, allocated: f64) -> Point {
        // One size class: each sample carries the same variance.
        Point {
            bytes,
            variance: samples * 1e5,
            samples,
            allocated_samples: Some(allocated),
        }
    }

    fn times(n: usize) -> Vec<f64> {
        (0..n).map(|i| i as f64 * 60.0).collect()
    }

    #[test]
    fn a_pure_leak_difference_carries_only_the_new_samples_variance() {
        let a = point(100.0, 10.0, 10.0);
        let b = point(150.0, 15.0, 15.0);
        assert_eq!(difference_variance(&a, &b), 5e5);
    }

    #[test]
    fn a_site_that_turned_over_every_sample_gets_both_variances() {
        let a = point(100.0, 10.0, 10.0);
        let b = point(100.0, 10.0, 20.0);
        assert_eq!(difference_variance(&a, &b), 20e5);
        let mut no_counts = b;
        no_counts.allocated_samples = None;
        assert_eq!(difference_variance(&a, &no_counts), 20e5);
    }

    #[test]
    fn the_plan_puts_checkpoints_through_the_last_half_and_ends_at_the_last_dump() {
        let plan = Plan::new(&times(21), &LeakOptions::default()).unwrap();
        assert_eq!(plan.checkpoints(), &[10, 15, 20]);
        let three = LeakOptions {
            steps: 3,
            ..LeakOptions::default()
        };
        let plan = Plan::new(&times(21), &three).unwrap();
        assert_eq!(plan.checkpoints(), &[10, 14, 17, 20]);
        assert_eq!(plan.steps(), 3);
    }

    #[test]
    fn a_window_of_too_few_dumps_is_an_error_naming_what_is_needed() {
        let err = Plan::new(&[0.0, 10.0, 20.0, 30.0], &LeakOptions::default()).unwrap_err();
        assert!(err.to_string().contains("at least 3"), "{err}");
        assert!(Plan::new(&[0.0, 30.0, 31.0, 32.0], &LeakOptions::default()).is_err());
        let wide = LeakOptions {
            window: 1.0,
            ..LeakOptions::default()
        };
        assert_eq!(
            Plan::new(&[0.0, 10.0, 20.0, 30.0], &wide)
                .unwrap()
                .checkpoints(),
            &[0, 2, 3]
        );
    }

    #[test]
    fn a_steady_leak_is_significant_and_its_rate_interval_holds_the_truth() {
        let plan = Plan::new(&times(21), &LeakOptions::default()).unwrap();
        // 1,000 bytes and one sample a minute, nothing freed.
        let series: Vec<Point> = (0..21)
            .map(|i| point(1000.0 * i as f64, i as f64, i as f64))
            .collect();
        let t = trend(&plan, &series);
        assert!(t.p_value < 1e-3, "{t:?}");
        assert!(
            t.rate_low < 1000.0 / 60.0 && 1000.0 / 60.0 < t.rate_high,
            "{t:?}"
        );
        assert_eq!(t.started, 0.0);
        assert_eq!(t.live, 20_000.0);
    }

    #[test]
    fn a_store_that_stopped_growing_a_cache_that_empties_and_a_burst_are_not_growing() {
        let plan = Plan::new(&times(21), &LeakOptions::default()).unwrap();
        let warm_up: Vec<Point> = (0..21)
            .map(|i| {
                let n = i.min(8) as f64;
                point(1000.0 * n, n, n)
            })
            .collect();
        let mut allocated = 0.0;
        let cache: Vec<Point> = (0..21)
            .map(|i| {
                let n = (i % 5) as f64 * 4.0;
                allocated += 4.0;
                point(1000.0 * n, n, allocated)
            })
            .collect();
        let burst: Vec<Point> = (0..21)
            .map(|i| {
                let n = if (12..15).contains(&i) { 50.0 } else { 1.0 };
                point(1000.0 * n, n, if i < 12 { 1.0 } else { 51.0 })
            })
            .collect();
        for series in [warm_up, cache, burst] {
            assert!(trend(&plan, &series).p_value >= 0.5, "{series:?}");
        }
    }

    #[test]
    fn the_rise_started_where_the_floor_last_began_to_climb() {
        let plan = Plan::new(&times(21), &LeakOptions::default()).unwrap();
        // Flat at 5 samples until dump 6, then one more each minute.
        let series: Vec<Point> = (0..21)
            .map(|i| {
                let n = 5.0 + (i as f64 - 6.0).max(0.0);
                point(1000.0 * n, n, n)
            })
            .collect();
        assert_eq!(trend(&plan, &series).started, 6.0 * 60.0);
    }

    #[test]
    fn benjamini_hochberg_keeps_every_p_value_up_to_the_largest_under_its_line() {
        // m = 4, level 0.1: lines 0.025, 0.05, 0.075, 0.1; the third is under, the second not.
        let found = benjamini_hochberg(&[0.07, 0.001, 0.9, 0.06], 0.1);
        assert_eq!(found, vec![true, true, false, true]);
        assert_eq!(benjamini_hochberg(&[0.5, 0.6], 0.05), vec![false, false]);
        assert!(benjamini_hochberg(&[], 0.05).is_empty());
    }

    #[test]
    fn the_normal_tail_matches_known_values() {
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-15);
        assert!((normal_upper_tail(Z_95) - 0.025).abs() < 1e-12);
        assert!((normal_upper_tail(-Z_95) - 0.975).abs() < 1e-12);
    }
}
