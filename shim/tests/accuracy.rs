//! Accuracy over many seeds: the per-site estimates are unbiased (mean within 2% of the truth) and
//! their 95% intervals cover the truth 90%–99% of the time.

mod common;

use common::{Attributor, SITES};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// R small enough that the mean of 100 runs has a relative standard error of about 0.5% for the
/// 8-byte site (one run: √(R/8 MB) ≈ 4.5%), so the 2% bound is 4 standard errors wide.
const PERIOD: u64 = 16 << 10;
const SEEDS: u64 = 100;

#[test]
fn per_site_estimates_are_unbiased_and_intervals_cover_the_truth() {
    jeprof_shim::configure("symbolize:false").unwrap();
    jeprof_shim::set_sample_rate(PERIOD);
    let mut attributor = Attributor::default();
    let mut sums = [0.0f64; 3];
    let mut covered = [0u32; 3];
    for seed in 0..SEEDS {
        jeprof_shim::reseed(0x5EED_0000 + seed);
        let live = common::run(100);
        let profile = jeprof_shim::snapshot();
        assert_eq!(profile.sample_period, PERIOD);
        let estimates = common::per_site(&profile, &mut attributor);
        for (i, (_, truth)) in SITES.iter().enumerate() {
            let e = estimates[i];
            sums[i] += e.bytes;
            let (lo, hi) = e.bytes_interval_95();
            if lo <= *truth && *truth <= hi {
                covered[i] += 1;
            }
        }
        // The 8 MiB object is always sampled (p = 1 − e^(−512) = 1): its estimate is exact.
        assert_eq!(estimates[2].bytes, SITES[2].1, "seed {seed}");
        drop(live);
    }
    for (i, (site, truth)) in SITES.iter().enumerate() {
        let mean = sums[i] / SEEDS as f64;
        println!(
            "{site}: mean {mean:.0} truth {truth:.0} ({:+.2}%), covered {}/{SEEDS}",
            (mean / truth - 1.0) * 100.0,
            covered[i]
        );
        assert!(
            (mean / truth - 1.0).abs() < 0.02,
            "{site}: mean estimate {mean} vs truth {truth}"
        );
    }
    // Coverage, pooled over the two sites whose intervals are not degenerate (200 intervals).
    let pooled = (covered[0] + covered[1]) as f64 / (2 * SEEDS) as f64;
    assert!(
        (0.90..=0.99).contains(&pooled),
        "95% intervals covered the truth in {:.1}% of runs",
        pooled * 100.0
    );
    let stats = jeprof_shim::stats();
    assert_eq!(stats.dropped.total(), 0, "{stats:?}");
}
