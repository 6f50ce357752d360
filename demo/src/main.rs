//! The shim's demo: a workload with known live bytes per call site, a dump, and per site the
//! truth, the shim's estimate, its 95% interval and whether the truth lies inside it.
//!
//! ```text
//! cargo run --release -p jeprof-demo
//! ```
//!
//! It samples at R = 4 KiB, so that the intervals of 16 MB sites are a few percent wide, unless
//! `JEPROF_SHIM` sets `sample_rate` (the profiler's default is 512 KiB: intervals widen as √R).
//! `JEPROF_SHIM=seed:N` draws another set of samples.

use std::hint::black_box;
use std::time::Instant;

use jeprof_shim::jeprof_dumpfmt::math::sample_probability;
use jeprof_shim::jeprof_dumpfmt::model::symbol_key;
use jeprof_shim::jeprof_dumpfmt::{Estimate, Profile};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// The demo's period when `JEPROF_SHIM` sets none: small enough for tight intervals on sites of
/// 16 MB, large enough that the whole run takes about a second.
const DEMO_SAMPLE_RATE: u64 = 4096;

/// One 8-byte box (of 2,000,000: 16,000,000 bytes live).
#[inline(never)]
fn many_small_boxes(i: u64) -> Box<u64> {
    Box::new(black_box(i))
}

/// One 4 KiB page (of 4,000: 16,384,000 bytes live).
#[inline(never)]
fn page_buffers() -> Vec<u8> {
    vec![1u8; 4096]
}

/// One 16 MiB buffer: 16,777,216 bytes live.
#[inline(never)]
fn one_big_buffer() -> Vec<u8> {
    vec![2u8; 16 << 20]
}

/// Allocates and frees `n` blocks of 16–4096 bytes: nothing stays live.
#[inline(never)]
fn churn(n: usize) {
    for i in 0..n {
        let v: Vec<u8> = Vec::with_capacity(16 + (i * 2_654_435_761) % 4081);
        black_box(&v);
    }
}

/// A call site: its function's name, how many objects of which size it leaves live.
struct Site {
    name: &'static str,
    objects: u64,
    size: u64,
}

impl Site {
    fn truth(&self) -> f64 {
        (self.objects * self.size) as f64
    }
}

/// Sizes are jemalloc size classes, so the bytes it accounts (usable sizes) are the bytes asked.
const SITES: [Site; 4] = [
    Site {
        name: "many_small_boxes",
        objects: 2_000_000,
        size: 8,
    },
    Site {
        name: "page_buffers",
        objects: 4_000,
        size: 4096,
    },
    Site {
        name: "one_big_buffer",
        objects: 1,
        size: 16 << 20,
    },
    Site {
        name: "churn",
        objects: 0,
        size: 0,
    },
];

/// In-use estimate per site: a stack belongs to a site when one of its frames' symbols (the
/// profile's own symbol table) names the site's function.
fn per_site(profile: &Profile) -> [Estimate; SITES.len()] {
    let mut out = [Estimate::default(); SITES.len()];
    let Some(symbols) = &profile.symbols else {
        return out;
    };
    for stack in &profile.stacks {
        let site = stack.frames.iter().enumerate().find_map(|(i, &frame)| {
            let names = symbols.names.get(&symbol_key(i, frame))?;
            SITES.iter().position(|site| {
                names
                    .iter()
                    .any(|n| n.ends_with(&format!("::{}", site.name)))
            })
        });
        if let Some(site) = site {
            out[site].add(&stack.counts.inuse);
        }
    }
    out
}

/// Whether `JEPROF_SHIM` sets the sampling period (the demo then keeps it).
fn rate_set_by_environment() -> bool {
    std::env::var("JEPROF_SHIM").is_ok_and(|spec| {
        spec.split(',')
            .filter_map(|pair| pair.split_once(':'))
            .any(|(key, _)| key.trim() == "sample_rate")
    })
}

/// `bytes` in MB with two decimals.
fn mb(bytes: f64) -> String {
    format!("{:.2} MB", bytes / 1e6)
}

fn main() {
    if !rate_set_by_environment() {
        jeprof_shim::set_sample_rate(DEMO_SAMPLE_RATE);
    }
    let start = Instant::now();
    let mut small = Vec::with_capacity(2_000_000);
    let mut pages = Vec::with_capacity(4_000);
    let mut big = Vec::new();
    for round in 0..100u64 {
        for i in 0..20_000 {
            small.push(many_small_boxes(round * 20_000 + i));
        }
        for _ in 0..40 {
            pages.push(page_buffers());
        }
        if round == 50 {
            big = one_big_buffer();
        }
        churn(500);
    }
    let workload = start.elapsed();

    let path = std::env::temp_dir().join(format!("jeprof-demo-{}.prof", std::process::id()));
    let t = Instant::now();
    jeprof_shim::dump(&path).expect("dump");
    let dump_time = t.elapsed();
    // Before the snapshot, so that `last_symbolization` is the dump's.
    let stats = jeprof_shim::stats();
    let profile = jeprof_shim::snapshot();
    let period = profile.sample_period as f64;

    println!(
        "Sampling at R = {} bytes (the default is {}; JEPROF_SHIM=sample_rate:N changes it), \
         unwinder {:?}.",
        profile.sample_period,
        jeprof_shim::DEFAULT_SAMPLE_RATE,
        stats.unwinder
    );
    println!(
        "Workload {:.2?}: {} samples taken; dump {:.2?}.\n",
        workload, stats.samples_taken, dump_time
    );
    println!(
        "{:<17} {:>19} {:>8} {:>10} {:>10} {:>26}",
        "call site", "live objects", "sampled", "truth", "estimate", "95% interval"
    );
    for (estimate, site) in per_site(&profile).iter().zip(&SITES) {
        let truth = site.truth();
        let (lo, hi) = estimate.bytes_interval_95();
        let objects = if site.objects == 0 {
            "0 (all freed)".to_string()
        } else {
            format!("{} × {} B", site.objects, site.size)
        };
        // Every object of a site has one size, so each was sampled with the same probability p
        // and stands for 1/p objects: the samples behind the estimate are objects × p.
        let sampled = estimate.objects * sample_probability(site.size as f64, period);
        let half = if estimate.bytes > 0.0 {
            format!("±{:.1}%", (hi - lo) / 2.0 / estimate.bytes * 100.0)
        } else {
            "±0%".to_string()
        };
        let verdict = if (lo..=hi).contains(&truth) {
            "truth inside"
        } else {
            "truth OUTSIDE (a 95% interval misses 1 time in 20)"
        };
        let interval = format!("{:.2}–{:.2}", lo / 1e6, hi / 1e6);
        println!(
            "{:<17} {objects:>19} {sampled:>8.0} {:>10} {:>10} {interval:>18} {half:>7}  {verdict}",
            site.name,
            mb(truth),
            mb(estimate.bytes),
        );
    }
    println!(
        "\nEach sample stands for 1/p objects of its size (p = 1 − e^(−size/R)): a few thousand of \
         the two million\nboxes were sampled and their total is still right; the 16 MiB buffer is \
         sampled almost surely and counted\nalmost exactly; what was freed is gone from the profile."
    );

    println!("\nThe dump is {}; read it with", path.display());
    println!(
        "  cargo run --release -p jeprof-compat -- report --interval --show_bytes {}",
        path.display()
    );
    println!("  jeprof --text {}   (no binary needed)", path.display());
    println!(
        "\nProfiler: {} live samples, {} distinct stacks, {} bytes of metadata, {} dropped.",
        stats.live_samples,
        stats.distinct_stacks,
        stats.metadata_bytes,
        stats.dropped.total()
    );
    if let Some(cost) = stats.last_symbolization {
        println!(
            "Symbolization: {} addresses, peak {:.1} MB of debug-info caches, {} bytes kept after \
             clearing them.",
            cost.addresses,
            cost.peak_bytes as f64 / 1e6,
            cost.retained_bytes
        );
    }
    black_box((small, pages, big));
}
