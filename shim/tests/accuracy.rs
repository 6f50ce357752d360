//! Accuracy over many seeds: the per-site estimates are unbiased (mean within 2% of the truth) and
//! their 95% intervals cover the truth 90%–99% of the time.

mod common;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// R small enough that the mean of 100 runs has a relative standard error of about 0.5% for the
/// 8-byte site (one run: √(R/8 MB) ≈ 4.5%), so the 2% bound is 4 standard errors wide.
const PERIOD: u64 = 16 << 10;
const SEEDS: u64 = 100;

#[test]
fn per_site_estimates_are_unbiased_and_intervals_cover_the_truth() {
    let over = common::estimates_over_seeds(PERIOD, SEEDS, 100);
    over.assert_means_within(&[0, 1, 2], 0.02);
    // Coverage, pooled over the two sites whose intervals are not degenerate (200 intervals).
    let pooled = (over.covered[0] + over.covered[1]) as f64 / (2 * SEEDS) as f64;
    assert!(
        (0.90..=0.99).contains(&pooled),
        "95% intervals covered the truth in {:.1}% of runs",
        pooled * 100.0
    );
}
