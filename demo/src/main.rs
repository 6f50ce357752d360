//! The demo: a workload with known live bytes per call site, a dump, and per site the shim's
//! estimate, its 95% interval and the truth.
//!
//! ```text
//! cargo run --release --example demo -p jeprof-shim
//! ```
//!
//! Set `JEPROF_SHIM` (e.g. `sample_rate:65536` or `seed:1`) to try other settings.

use std::hint::black_box;
use std::time::Instant;

use jeprof_shim::jeprof_dumpfmt::{model::symbol_key, Estimate, Profile};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// One million 8-byte boxes: 8,000,000 bytes live.
#[inline(never)]
fn many_small_boxes(i: u64) -> Box<u64> {
    Box::new(black_box(i))
}

/// Two thousand 4 KiB pages: 8,192,000 bytes live.
#[inline(never)]
fn page_buffers() -> Vec<u8> {
    vec![1u8; 4096]
}

/// One 8 MiB buffer: 8,388,608 bytes live.
#[inline(never)]
fn one_big_buffer() -> Vec<u8> {
    vec![2u8; 8 << 20]
}

/// Allocates and frees blocks of 16–4096 bytes; nothing stays live.
#[inline(never)]
fn churn(n: usize) {
    for i in 0..n {
        let v: Vec<u8> = Vec::with_capacity(16 + (i * 2_654_435_761) % 4081);
        black_box(&v);
    }
}

const SITES: [(&str, f64); 3] = [
    ("many_small_boxes", 8_000_000.0),
    ("page_buffers", 8_192_000.0),
    ("one_big_buffer", 8_388_608.0),
];

/// In-use estimate per site: a stack belongs to a site when one of its frames' symbols (the
/// profile's own symbol table) names the site's function.
fn per_site(profile: &Profile) -> [Estimate; 3] {
    let mut out = [Estimate::default(); 3];
    let Some(symbols) = &profile.symbols else {
        return out;
    };
    for stack in &profile.stacks {
        let site = stack.frames.iter().enumerate().find_map(|(i, &frame)| {
            let names = symbols.names.get(&symbol_key(i, frame))?;
            SITES
                .iter()
                .position(|(site, _)| names.iter().any(|n| n.ends_with(&format!("::{site}"))))
        });
        if let Some(site) = site {
            out[site].add(&stack.counts.inuse);
        }
    }
    out
}

fn main() {
    let start = Instant::now();
    let mut small = Vec::with_capacity(1_000_000);
    let mut pages = Vec::with_capacity(2_000);
    let mut big = Vec::new();
    for round in 0..100u64 {
        for i in 0..10_000 {
            small.push(many_small_boxes(round * 10_000 + i));
        }
        for _ in 0..20 {
            pages.push(page_buffers());
        }
        if round == 50 {
            big = one_big_buffer();
        }
        churn(20_000);
    }
    let workload = start.elapsed();

    let path = std::env::temp_dir().join(format!("jeprof-shim-demo-{}.prof", std::process::id()));
    let t = Instant::now();
    jeprof_shim::dump(&path).expect("dump");
    let dump_time = t.elapsed();
    println!("dump written to {}", path.display());
    println!("  (jeprof --text {} needs no binary)", path.display());

    let profile = jeprof_shim::snapshot();
    let stats = jeprof_shim::stats();
    println!(
        "\nR = {} bytes, unwinder {:?}, workload {:.2?}, dump {:.2?}",
        profile.sample_period, stats.unwinder, workload, dump_time
    );
    println!(
        "{:<18} {:>14} {:>29} {:>12} {:>8}",
        "call site", "estimate (B)", "95% interval (B)", "truth (B)", "error"
    );
    for (estimate, (site, truth)) in per_site(&profile).iter().zip(SITES) {
        let (lo, hi) = estimate.bytes_interval_95();
        println!(
            "{site:<18} {:>14.0} {:>14.0} – {:<12.0} {truth:>12.0} {:>+7.1}%",
            estimate.bytes,
            lo,
            hi,
            (estimate.bytes / truth - 1.0) * 100.0
        );
    }
    println!(
        "\nprofiler: {} samples taken, {} live, {} distinct stacks, {} bytes of metadata, \
         {} dropped",
        stats.samples_taken,
        stats.live_samples,
        stats.distinct_stacks,
        stats.metadata_bytes,
        stats.dropped.total()
    );
    if let Some(cost) = stats.last_symbolization {
        println!(
            "symbolization: {} addresses, peak {:.1} MB of debug-info caches, {} bytes kept \
             after clearing them",
            cost.addresses,
            cost.peak_bytes as f64 / 1e6,
            cost.retained_bytes
        );
    }
    black_box((small, pages, big));
}
