//! The statistics of the churn tables: paired ratios, their median with a bootstrap interval, and
//! geometric means over code layouts.
//!
//! Why these: on a shared machine a disturbance (another process, a frequency change) lasts about
//! as long as a round, so it affects both runs of a pair alike and leaves their ratio mostly alone.
//! The ratios of many rounds are not normal (a disturbed round gives an outlier), and the median
//! and the percentile bootstrap do not assume they are. Code layout is a multiplicative effect on
//! a run, so layouts are averaged geometrically (a layout 2% fast and one 2% slow cancel).

/// One measurement per round, `None` where that round's run failed.
pub type Series = [Option<f64>];

/// xorshift64*: the bench's own generator, for the run order of each round and the bootstrap, so
/// a run is repeatable from its seed and the crate needs no generator dependency.
#[derive(Debug, Clone)]
pub struct Xorshift(u64);

impl Xorshift {
    /// A generator from `seed` (a zero seed, which xorshift never leaves, is replaced).
    pub fn new(seed: u64) -> Self {
        Xorshift(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`); the modulo bias is below 2^-40 for the sizes used here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Puts `v` in a uniformly random order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// The median of `v`: the middle value, or the mean of the two middle values for an even count;
/// `None` for no values.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// `f(mode, baseline)` for every round where both ran, in round order.
pub fn paired(mode: &Series, baseline: &Series, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    mode.iter()
        .zip(baseline)
        .filter_map(|(m, b)| Some(f((*m)?, (*b)?)))
        .collect()
}

/// The ratio `mode / baseline` of every round where both ran.
pub fn paired_ratios(mode: &Series, baseline: &Series) -> Vec<f64> {
    paired(mode, baseline, |m, b| m / b)
}

/// The smallest value of `v` that is there, `None` when no run succeeded.
pub fn fastest(v: &Series) -> Option<f64> {
    v.iter().flatten().copied().reduce(f64::min)
}

/// How many resamples [`bootstrap_median_interval`] draws.
pub const RESAMPLES: usize = 1000;

/// A 95% interval for the median of `v` by the percentile bootstrap: the 2.5th and 97.5th
/// percentiles of the medians of [`RESAMPLES`] resamples of `v` with replacement. `None` for no
/// values.
pub fn bootstrap_median_interval(v: &[f64], rng: &mut Xorshift) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let mut resample = vec![0.0; v.len()];
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            for x in resample.iter_mut() {
                *x = v[rng.below(v.len())];
            }
            median(&resample).expect("a resample is as long as v, which is not empty")
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    Some((
        medians[RESAMPLES / 40],
        medians[RESAMPLES - 1 - RESAMPLES / 40],
    ))
}

/// The geometric mean of `v` (all positive), `None` for no values.
pub fn geometric_mean(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    Some((v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

/// Per round, the geometric mean over layouts of each layout's ratio `mode / baseline`, for the
/// rounds where every layout's pair ran (a round with a hole would average over other layouts
/// than its neighbours). `pairs` holds, per layout, the mode's and its baseline's series.
pub fn layout_means_per_round(pairs: &[(&Series, &Series)]) -> Vec<f64> {
    let rounds = pairs.iter().map(|(m, b)| m.len().min(b.len())).min();
    (0..rounds.unwrap_or(0))
        .filter_map(|r| {
            let ratios: Option<Vec<f64>> = pairs.iter().map(|(m, b)| Some(m[r]? / b[r]?)).collect();
            geometric_mean(&ratios?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_count_is_the_middle_value() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
    }

    #[test]
    fn median_of_even_count_averages_the_two_middle_values() {
        assert_eq!(median(&[4.0, 1.0, 2.0, 10.0]), Some(3.0));
    }

    #[test]
    fn median_of_nothing_is_none() {
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn paired_ratios_skip_rounds_where_either_run_failed() {
        let mode = [Some(2.0), None, Some(3.0), Some(8.0)];
        let base = [Some(1.0), Some(1.0), None, Some(4.0)];
        assert_eq!(paired_ratios(&mode, &base), vec![2.0, 2.0]);
    }

    #[test]
    fn fastest_ignores_failed_rounds() {
        assert_eq!(fastest(&[None, Some(3.0), Some(2.5), None]), Some(2.5));
        assert_eq!(fastest(&[None, None]), None);
    }

    #[test]
    fn bootstrap_interval_of_identical_values_is_that_value() {
        let mut rng = Xorshift::new(1);
        assert_eq!(
            bootstrap_median_interval(&[1.25; 9], &mut rng),
            Some((1.25, 1.25))
        );
    }

    #[test]
    fn bootstrap_interval_brackets_the_median_and_narrows_with_more_rounds() {
        // 1, 2, ..., n: the median is (n + 1) / 2; a 95% interval for it spans about
        // ±1.96 * sqrt(n) / 2 ranks, so about ±10 for n = 101 and ±31 for n = 1001 (in units of
        // the values, ranks here): relative to the range it shrinks like 1/sqrt(n).
        let mut rng = Xorshift::new(7);
        let small: Vec<f64> = (1..=101).map(f64::from).collect();
        let (lo, hi) = bootstrap_median_interval(&small, &mut rng).unwrap();
        assert!(lo < 51.0 && 51.0 < hi, "[{lo}, {hi}] misses the median 51");
        assert!(hi - lo > 8.0 && hi - lo < 40.0, "[{lo}, {hi}] for n = 101");
        let large: Vec<f64> = (1..=1001).map(f64::from).collect();
        let (lo2, hi2) = bootstrap_median_interval(&large, &mut rng).unwrap();
        assert!(lo2 < 501.0 && 501.0 < hi2, "[{lo2}, {hi2}] misses 501");
        assert!(
            (hi2 - lo2) / 1000.0 < (hi - lo) / 100.0 / 2.0,
            "relative width did not shrink: [{lo}, {hi}] of 100 vs [{lo2}, {hi2}] of 1000"
        );
    }

    #[test]
    fn bootstrap_interval_is_repeatable_from_the_seed() {
        let v = [1.0, 1.1, 0.9, 1.3, 1.05, 0.97, 1.2];
        let a = bootstrap_median_interval(&v, &mut Xorshift::new(3));
        let b = bootstrap_median_interval(&v, &mut Xorshift::new(3));
        assert_eq!(a, b);
    }

    #[test]
    fn geometric_mean_of_reciprocal_ratios_is_one() {
        let g = geometric_mean(&[1.25, 0.8]).unwrap();
        assert!((g - 1.0).abs() < 1e-12, "{g}");
        let g = geometric_mean(&[2.0, 8.0]).unwrap();
        assert!((g - 4.0).abs() < 1e-12, "{g}");
    }

    #[test]
    fn layout_means_keep_only_rounds_where_every_layout_ran() {
        let a_mode = [Some(2.0), Some(1.0), Some(3.0)];
        let a_base = [Some(1.0), Some(1.0), Some(1.0)];
        let b_mode = [Some(1.0), None, Some(3.0)];
        let b_base = [Some(2.0), Some(1.0), Some(3.0)];
        let means = layout_means_per_round(&[(&a_mode, &a_base), (&b_mode, &b_base)]);
        // Round 0: sqrt(2 * 0.5) = 1; round 1 dropped; round 2: sqrt(3 * 1).
        assert_eq!(means.len(), 2);
        assert!((means[0] - 1.0).abs() < 1e-12);
        assert!((means[1] - 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn shuffle_is_a_permutation_and_reaches_every_position() {
        let mut rng = Xorshift::new(11);
        let mut first_seen = [false; 5];
        for _ in 0..200 {
            let mut v = [0, 1, 2, 3, 4];
            rng.shuffle(&mut v);
            let mut sorted = v;
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2, 3, 4]);
            first_seen[v[0]] = true;
        }
        assert_eq!(first_seen, [true; 5], "some element never came first");
    }
}
