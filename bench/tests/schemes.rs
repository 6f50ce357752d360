//! The scheme harness on a small configuration, asserting what the theory says: Poisson's estimate
//! is unbiased with honest intervals; the address hash misses a few leaks among a handful of reused
//! addresses while Poisson sees them; a page hash samples nothing from a working set of a few pages.
//! The workloads run under jemalloc, as in `scheme-report`, so the addresses are jemalloc's.

use std::rc::Rc;

use jeprof_bench::schemes::evaluate::{evaluate, WorkloadResult};
use jeprof_bench::schemes::scheme::SchemeSpec;
use jeprof_bench::schemes::workloads;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const POISSON_4K: SchemeSpec = SchemeSpec::Poisson { period: 4096 };

fn site(result: &WorkloadResult, prefix: &str) -> usize {
    result
        .sites
        .iter()
        .position(|s| s.starts_with(prefix))
        .unwrap_or_else(|| panic!("no site {prefix} in {:?}", result.sites))
}

#[test]
fn poisson_estimate_is_unbiased_and_its_intervals_cover_ninety_five_percent() {
    let seeds = 40;
    let result = evaluate("leaky", &[POISSON_4K], seeds, |seed| {
        Rc::new(workloads::leaky(20_000, seed))
    });
    let poisson = &result.schemes[0];
    let total = &poisson.live_total;
    assert!(
        total.bias().abs() <= 3.0 * total.bias_standard_error(),
        "mean relative error {} over {seeds} seeds, standard error {}",
        total.bias(),
        total.bias_standard_error()
    );
    // Every site's intervals pooled: 160 intervals, so 95% ± 1.7% (one standard deviation).
    let covered: Vec<bool> = poisson
        .live
        .iter()
        .flat_map(|s| s.covered.clone())
        .collect();
    let coverage = covered.iter().filter(|&&c| c).count() as f64 / covered.len() as f64;
    assert_eq!(covered.len(), 4 * seeds as usize);
    assert!(
        (0.88..=0.99).contains(&coverage),
        "coverage {coverage} of {} intervals",
        covered.len()
    );
}

#[test]
fn address_hash_misses_the_high_reuse_leaks_that_poisson_sees() {
    let seeds = 30;
    let schemes = [POISSON_4K, SchemeSpec::AddressHash { one_in: 256 }];
    let result = evaluate("high-reuse", &schemes, seeds, |seed| {
        Rc::new(workloads::high_reuse(100, 50_000, 40, seed))
    });
    let leak = site(&result, "leak_buffer");
    let within_half = |scheme: usize| {
        result.schemes[scheme].live[leak]
            .relative_errors
            .iter()
            .filter(|e| e.abs() <= 0.5)
            .count()
    };
    let none_sampled = result.schemes[1].live[leak]
        .relative_errors
        .iter()
        .filter(|&&e| e == -1.0)
        .count();
    assert!(
        within_half(0) >= 24,
        "Poisson at 4 KiB within 50% of the leaked bytes in only {} of {seeds} seeds",
        within_half(0)
    );
    assert!(
        within_half(1) <= 6,
        "the address hash was within 50% of the leaked bytes in {} of {seeds} seeds",
        within_half(1)
    );
    assert!(
        none_sampled > seeds as usize / 2,
        "the address hash sampled one of the leaks in {} of {seeds} seeds",
        seeds as usize - none_sampled
    );
}

#[test]
fn page_hash_samples_nothing_from_a_working_set_of_few_pages() {
    let seeds = 30;
    let schemes = [SchemeSpec::PageHash { one_in: 1024 }, POISSON_4K];
    let result = evaluate("high-reuse", &schemes, seeds, |seed| {
        Rc::new(workloads::high_reuse(100, 20_000, 40, seed))
    });
    let pages = result
        .truths
        .iter()
        .map(|t| t.distinct_pages)
        .max()
        .unwrap_or(0);
    assert!(pages < 1000, "the working set spans {pages} pages");
    let nothing = |s: usize| {
        result.schemes[s]
            .sampled_nothing
            .iter()
            .filter(|&&b| b)
            .count()
    };
    assert!(
        nothing(0) > seeds as usize / 2,
        "the page hash sampled something in {} of {seeds} seeds ({pages} pages at most)",
        seeds as usize - nothing(0)
    );
    assert_eq!(nothing(1), 0, "Poisson sampled nothing in some seed");
}

#[test]
fn scheme_report_writes_the_report_and_its_three_figures() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_scheme-report"))
        .arg("--out")
        .arg(out.path())
        .args([
            "--seeds",
            "3",
            "--objects",
            "3000",
            "--reuse-rounds",
            "3000",
        ])
        .args(["--no-servers", "--no-callgrind"])
        .status()
        .expect("scheme-report runs");
    assert!(status.success(), "scheme-report: {status}");
    let report = std::fs::read_to_string(out.path().join("REPORT.md")).expect("REPORT.md");
    for section in [
        "### leaky",
        "### high-reuse",
        "the server traces (`--no-servers`)",
    ] {
        assert!(report.contains(section), "REPORT.md lacks {section:?}");
    }
    for figure in ["error.svg", "coverage.svg", "sampled.svg"] {
        let svg = std::fs::read_to_string(out.path().join(figure)).expect(figure);
        assert!(
            svg.starts_with("<svg") && svg.contains("poisson-4K"),
            "{figure} is not the chart"
        );
    }
}

#[test]
fn scheme_report_exits_2_naming_the_schemes_when_given_an_unknown_one() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_scheme-report"))
        .args(["--driver", "poisson-3K"])
        .output()
        .expect("scheme-report runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("poisson-3K") && stderr.contains("addr-hash-1/256"),
        "{stderr}"
    );
}
