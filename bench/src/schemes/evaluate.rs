//! Replaying a trace through a scheme, and what the replays say over many seeds.

use jeprof_dumpfmt::math::Z_95;

use super::scheme::{Scheme, SchemeSpec};
use super::trace::{Event, Trace, Truth};

/// Consecutive allocations per window when counting stretches with no sample.
pub const WINDOW: u64 = 100_000;

/// One scheme's estimates from one replay of one trace.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Estimated live bytes per site at the snapshot.
    pub live: Vec<f64>,
    /// The variance estimate of `live`.
    pub live_variance: Vec<f64>,
    /// Estimated bytes allocated per site up to the snapshot.
    pub allocated: Vec<f64>,
    /// The variance estimate of `allocated`.
    pub allocated_variance: Vec<f64>,
    /// Allocations sampled.
    pub sampled_allocations: u64,
    /// Bytes of the allocations sampled.
    pub sampled_bytes: u64,
    /// Whole windows of [`WINDOW`] allocations.
    pub windows: u64,
    /// Of those, the windows with no sample.
    pub empty_windows: u64,
}

/// Runs every allocation of `trace` through `scheme` and sums the weights of the samples still live
/// at the end. `inclusion` is scratch space (one slot per allocation), kept between replays.
pub fn replay(scheme: &mut dyn Scheme, trace: &Trace, inclusion: &mut Vec<f64>) -> Replay {
    let sites = trace.sites.len();
    let mut out = Replay {
        live: vec![0.0; sites],
        live_variance: vec![0.0; sites],
        allocated: vec![0.0; sites],
        allocated_variance: vec![0.0; sites],
        ..Replay::default()
    };
    inclusion.clear();
    inclusion.resize(trace.allocations.len(), 0.0);
    let (mut in_window, mut window_sampled) = (0u64, false);
    for event in &trace.events {
        match *event {
            Event::Alloc(i) => {
                let a = trace.allocations[i as usize];
                if let Some(p) = scheme.decide(a.addr, a.size) {
                    inclusion[i as usize] = p;
                    let w = scheme.weigh(a.size, p);
                    let s = a.site as usize;
                    out.live[s] += w.bytes;
                    out.live_variance[s] += w.bytes_variance;
                    out.allocated[s] += w.bytes;
                    out.allocated_variance[s] += w.bytes_variance;
                    out.sampled_allocations += 1;
                    out.sampled_bytes += a.size;
                    window_sampled = true;
                }
                in_window += 1;
                if in_window == WINDOW {
                    out.windows += 1;
                    out.empty_windows += u64::from(!window_sampled);
                    (in_window, window_sampled) = (0, false);
                }
            }
            Event::Free(i) => {
                let p = inclusion[i as usize];
                if p > 0.0 {
                    let a = trace.allocations[i as usize];
                    let w = scheme.weigh(a.size, p);
                    out.live[a.site as usize] -= w.bytes;
                    out.live_variance[a.site as usize] -= w.bytes_variance;
                }
            }
        }
    }
    out
}

/// The errors of one estimate (one site, or the total) over seeds.
#[derive(Debug, Clone, Default)]
pub struct ErrorSummary {
    /// Relative errors (estimate − truth)/truth, one per seed.
    pub relative_errors: Vec<f64>,
    /// Per seed: whether the 95% interval held the truth.
    pub covered: Vec<bool>,
    /// Per seed: the truth.
    pub truths: Vec<f64>,
}

impl ErrorSummary {
    fn push(&mut self, truth: f64, estimate: f64, variance: f64) {
        self.relative_errors.push((estimate - truth) / truth);
        let half = Z_95 * variance.max(0.0).sqrt();
        self.covered.push((estimate - truth).abs() <= half);
        self.truths.push(truth);
    }

    /// Mean relative error over seeds: the bias.
    pub fn bias(&self) -> f64 {
        mean(&self.relative_errors)
    }

    /// The standard error of [`ErrorSummary::bias`]: the standard deviation over seeds / √seeds.
    pub fn bias_standard_error(&self) -> f64 {
        let n = self.relative_errors.len() as f64;
        if n < 2.0 {
            return f64::NAN;
        }
        let m = self.bias();
        let var = self
            .relative_errors
            .iter()
            .map(|e| (e - m) * (e - m))
            .sum::<f64>()
            / (n - 1.0);
        (var / n).sqrt()
    }

    /// Root mean square relative error over seeds.
    pub fn rms(&self) -> f64 {
        mean(
            &self
                .relative_errors
                .iter()
                .map(|e| e * e)
                .collect::<Vec<_>>(),
        )
        .sqrt()
    }

    /// Fraction of seeds whose 95% interval held the truth.
    pub fn coverage(&self) -> f64 {
        mean(
            &self
                .covered
                .iter()
                .map(|&c| f64::from(u8::from(c)))
                .collect::<Vec<_>>(),
        )
    }

    /// Mean truth over seeds: the weight of this site in the aggregates.
    pub fn mean_truth(&self) -> f64 {
        mean(&self.truths)
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// One scheme on one workload, over seeds.
#[derive(Debug, Clone)]
pub struct SchemeResult {
    /// The scheme.
    pub scheme: SchemeSpec,
    /// Per seed: fraction of allocations sampled.
    pub allocation_fraction: Vec<f64>,
    /// Per seed: fraction of allocated bytes sampled.
    pub byte_fraction: Vec<f64>,
    /// Per seed: fraction of whole windows with no sample (NaN when the trace has none).
    pub empty_window_fraction: Vec<f64>,
    /// Per seed: whether the scheme sampled nothing at all.
    pub sampled_nothing: Vec<bool>,
    /// Live bytes per site (indexed like the trace's sites).
    pub live: Vec<ErrorSummary>,
    /// Total live bytes.
    pub live_total: ErrorSummary,
    /// Bytes allocated per site.
    pub allocated: Vec<ErrorSummary>,
}

/// An aggregate over sites, each weighted by its mean truth.
#[derive(Debug, Clone, Copy)]
pub struct Weighted {
    /// Truth-weighted mean of |bias| per site.
    pub abs_bias: f64,
    /// Truth-weighted root mean square of the per-site RMS errors.
    pub rms: f64,
    /// Truth-weighted mean coverage.
    pub coverage: f64,
}

/// The truth-weighted aggregate of per-site summaries (sites never live are left out).
pub fn weighted(sites: &[ErrorSummary]) -> Weighted {
    let (mut w, mut bias, mut ms, mut cov) = (0.0, 0.0, 0.0, 0.0);
    for s in sites.iter().filter(|s| !s.relative_errors.is_empty()) {
        let t = s.mean_truth();
        w += t;
        bias += t * s.bias().abs();
        ms += t * s.rms().powi(2);
        cov += t * s.coverage();
    }
    Weighted {
        abs_bias: bias / w,
        rms: (ms / w).sqrt(),
        coverage: cov / w,
    }
}

impl SchemeResult {
    fn new(scheme: SchemeSpec, sites: usize) -> SchemeResult {
        SchemeResult {
            scheme,
            allocation_fraction: Vec::new(),
            byte_fraction: Vec::new(),
            empty_window_fraction: Vec::new(),
            sampled_nothing: Vec::new(),
            live: vec![ErrorSummary::default(); sites],
            live_total: ErrorSummary::default(),
            allocated: vec![ErrorSummary::default(); sites],
        }
    }

    fn add(&mut self, truth: &Truth, replay: &Replay) {
        self.allocation_fraction
            .push(replay.sampled_allocations as f64 / truth.allocations as f64);
        self.byte_fraction
            .push(replay.sampled_bytes as f64 / truth.bytes as f64);
        self.empty_window_fraction.push(if replay.windows == 0 {
            f64::NAN
        } else {
            replay.empty_windows as f64 / replay.windows as f64
        });
        self.sampled_nothing.push(replay.sampled_allocations == 0);
        for s in 0..truth.live_bytes.len() {
            if truth.live_bytes[s] > 0.0 {
                self.live[s].push(truth.live_bytes[s], replay.live[s], replay.live_variance[s]);
            }
            if truth.allocated_bytes[s] > 0.0 {
                self.allocated[s].push(
                    truth.allocated_bytes[s],
                    replay.allocated[s],
                    replay.allocated_variance[s],
                );
            }
        }
        self.live_total.push(
            truth.live_bytes.iter().sum(),
            replay.live.iter().sum(),
            replay.live_variance.iter().sum(),
        );
    }

    /// Mean over seeds of a per-seed figure, NaNs left out.
    pub fn mean_of(values: &[f64]) -> f64 {
        mean(
            &values
                .iter()
                .copied()
                .filter(|v| !v.is_nan())
                .collect::<Vec<_>>(),
        )
    }
}

/// Every scheme on one workload, over seeds, with the traces' figures.
#[derive(Debug, Clone)]
pub struct WorkloadResult {
    /// The workload's name.
    pub name: String,
    /// Its call sites.
    pub sites: Vec<String>,
    /// One per scheme, in the order given.
    pub schemes: Vec<SchemeResult>,
    /// Per seed: the trace's truth.
    pub truths: Vec<Truth>,
}

/// Runs `schemes` over `seeds` seeds of a workload. `trace_for(seed)` makes (or hands back) the
/// trace of that seed; every scheme replays the same trace with its own randomness from the seed.
pub fn evaluate(
    name: &str,
    schemes: &[SchemeSpec],
    seeds: u64,
    mut trace_for: impl FnMut(u64) -> std::rc::Rc<Trace>,
) -> WorkloadResult {
    let mut results: Vec<SchemeResult> = Vec::new();
    let mut truths = Vec::new();
    let mut sites = Vec::new();
    let mut inclusion = Vec::new();
    for seed in 0..seeds {
        let trace = trace_for(seed);
        if results.is_empty() {
            sites = trace.sites.clone();
            results = schemes
                .iter()
                .map(|&s| SchemeResult::new(s, sites.len()))
                .collect();
        }
        assert_eq!(
            trace.sites, sites,
            "every seed of a workload has the same sites"
        );
        let truth = trace.truth();
        for (spec, result) in schemes.iter().zip(&mut results) {
            let mut scheme = spec.instantiate(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed);
            let r = replay(scheme.as_mut(), &trace, &mut inclusion);
            result.add(&truth, &r);
        }
        truths.push(truth);
    }
    WorkloadResult {
        name: name.to_string(),
        sites,
        schemes: results,
        truths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::scheme::SchemeSpec;

    #[test]
    fn a_scheme_that_samples_everything_estimates_exactly() {
        let mut t = Trace::default();
        let s = t.add_site("s");
        let a = t.alloc(0x10, 100, s);
        t.alloc(0x20, 50, s);
        t.free(a);
        // A Poisson period of 0 would not count down; a 1-in-1 Bernoulli samples every allocation.
        let mut scheme = SchemeSpec::Bernoulli { one_in: 1 }.instantiate(1);
        let r = replay(scheme.as_mut(), &t, &mut Vec::new());
        assert_eq!(r.live, vec![50.0]);
        assert_eq!(r.allocated, vec![150.0]);
        assert_eq!(r.live_variance, vec![0.0]);
        assert_eq!((r.sampled_allocations, r.sampled_bytes), (2, 150));
    }

    #[test]
    fn weighted_aggregate_weighs_sites_by_their_truth() {
        let mut big = ErrorSummary::default();
        big.push(900.0, 900.0, 0.0);
        let mut small = ErrorSummary::default();
        small.push(100.0, 200.0, 0.0);
        let w = weighted(&[big, small]);
        assert!((w.abs_bias - 0.1).abs() < 1e-12);
        assert!((w.coverage - 0.9).abs() < 1e-12);
    }
}
