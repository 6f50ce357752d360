//! Child of the churn runner (`cargo bench -p jeprof-bench --bench churn`): the churn, the cost of
//! one sample, and the time of a dump, under `jeprof_shim::Profiled<Jemalloc>`. Its settings come
//! from `JEPROF_SHIM`, which the shim reads at start-up; it prints `key value` lines.

use std::hint::black_box;
use std::time::Instant;

use clap::{Parser, Subcommand};
use jeprof_bench::realistic::{self, KvStore, LogIndex};
use jeprof_bench::workload::{self, Churn};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Child of the churn runner under the shim; settings in `JEPROF_SHIM`.
#[derive(Parser)]
#[command(name = "churn-shim")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The churn; prints elapsed_ns, cpu_ns, samples, unwinder.
    Churn(Churn),
    /// The churn with each thread in a scope; prints what `churn` prints, and each scope's live
    /// estimate at the end (after the threads freed their blocks: about 0).
    ChurnScoped {
        #[command(flatten)]
        churn: Churn,
        /// Distinct scopes the threads are spread over.
        #[arg(long, default_value_t = 2)]
        scopes: u64,
    },
    /// Times allocations of 64 B made 40 frames deep, first with the configured sampling, then
    /// with sampling off; prints sampled_ns and unsampled_ns per allocation, samples, frames.
    SampleCost {
        /// Allocations per timed batch.
        #[arg(long, default_value_t = 20_000)]
        allocations: u64,
    },
    /// The log pipeline and search index (`jeprof_bench::realistic`); prints its checksum,
    /// elapsed_ns, cpu_ns, samples, unwinder.
    LogIndex(LogIndex),
    /// The key–value store under a mixed load (`jeprof_bench::realistic`); prints the same.
    KvStore(KvStore),
    /// The search service on tantivy (`jeprof_bench::search_service`, feature `tantivy`); prints
    /// the same.
    #[cfg(feature = "tantivy")]
    SearchService(jeprof_bench::search_service::SearchService),
    /// Keeps that many 32-byte blocks live over 64 distinct stacks, then times a raw dump and
    /// two symbolized ones.
    Dump {
        /// Live blocks (every one is a sample with `sample_rate:1`).
        #[arg(long, default_value_t = 100_000)]
        live: u64,
    },
    /// Memory of the peak tracker: keeps `per-stack` 64-byte blocks live from each of 2^`depth`
    /// distinct stacks (run with `sample_rate:1`, so every block is a sample), frees them, and
    /// prints what the tracker holds (peak_tracker_bytes, peak_snapshots, peak_bytes_estimate,
    /// live_samples_at_peak, distinct_stacks) and the profiler's metadata.
    PeakMemory {
        /// Distinct stacks: 2^depth (at most 16, for 65,536 stacks).
        #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=16))]
        depth: u32,
        /// Live blocks per stack at the peak.
        #[arg(long, default_value_t = 4)]
        per_stack: u64,
    },
}

fn main() {
    match Cli::parse().task {
        Task::ChurnScoped { churn, scopes } => {
            workload::print_timing(&workload::run_in_scopes(&churn, scopes));
            let stats = jeprof_shim::stats();
            println!("samples {}", stats.samples_taken);
            for s in jeprof_shim::scopes() {
                println!("scope_live_bytes_estimate {} {:.0}", s.label, s.live.bytes);
            }
        }
        Task::Churn(churn) => {
            workload::print_timing(&workload::run(&churn));
            let stats = jeprof_shim::stats();
            println!("samples {}", stats.samples_taken);
            println!("unwinder {:?}", stats.unwinder);
        }
        Task::LogIndex(shape) => {
            realistic::run_timed(|| realistic::log_index(&shape));
            print_samples();
        }
        Task::KvStore(load) => {
            realistic::run_timed(|| realistic::kv_store(&load));
            print_samples();
        }
        #[cfg(feature = "tantivy")]
        Task::SearchService(load) => {
            realistic::run_timed(|| {
                jeprof_bench::search_service::search_service(&load).expect("the search service")
            });
            print_samples();
        }
        Task::SampleCost { allocations } => sample_cost(allocations as usize),
        Task::Dump { live } => dump_time(live as usize),
        Task::PeakMemory { depth, per_stack } => peak_memory(depth, per_stack as usize),
    }
}

/// What the shim reports after a workload: samples taken and the unwinder in use.
fn print_samples() {
    let stats = jeprof_shim::stats();
    println!("samples {}", stats.samples_taken);
    println!("unwinder {:?}", stats.unwinder);
}

/// Recurses `depth` frames, then runs `f`: every allocation `f` makes has a deep stack.
#[inline(never)]
fn at_depth<R>(depth: usize, f: &mut dyn FnMut() -> R) -> R {
    if depth == 0 {
        return f();
    }
    let r = at_depth(depth - 1, f);
    // Keeps the recursion from becoming a loop (a tail call).
    black_box(depth);
    r
}

fn sample_cost(n: usize) {
    let mut kept: Vec<Box<[u8; 64]>> = Vec::with_capacity(2 * n);
    let time_batch = |kept: &mut Vec<Box<[u8; 64]>>| {
        at_depth(40, &mut || {
            let start = Instant::now();
            for _ in 0..n {
                kept.push(Box::new([1u8; 64]));
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
    };
    // Warm up (arena creation, table growth), then measure.
    time_batch(&mut kept);
    kept.clear();
    let before = jeprof_shim::stats().samples_taken;
    let sampled = time_batch(&mut kept);
    let taken = jeprof_shim::stats().samples_taken - before;
    let profile = jeprof_shim::snapshot();
    let frames = profile
        .stacks
        .iter()
        .map(|s| s.frames.len())
        .max()
        .unwrap_or(0);
    drop(profile);
    kept.clear();
    jeprof_shim::set_sample_rate(0);
    let unsampled = time_batch(&mut kept);
    println!("sampled_ns {sampled:.0}");
    println!("unsampled_ns {unsampled:.0}");
    println!("samples {taken}");
    println!("frames {frames}");
}

fn dump_time(live: usize) {
    let mut kept: Vec<Box<[u8; 32]>> = Vec::with_capacity(live);
    for i in 0..live {
        // 64 distinct stacks.
        at_depth(4 + i % 64, &mut || kept.push(Box::new([2u8; 32])));
    }
    let stats = jeprof_shim::stats();
    println!("live_samples {}", stats.live_samples);
    println!("distinct_stacks {}", stats.distinct_stacks);
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
        eprintln!("churn-shim dump: {what}: {e}");
        std::process::exit(1)
    };
    jeprof_shim::configure("symbolize:false").unwrap_or_else(|e| fail("configure", &e));
    let mut buf = Vec::with_capacity(64 << 20);
    let start = Instant::now();
    jeprof_shim::dump_to(&mut buf).unwrap_or_else(|e| fail("raw dump", &e));
    println!("raw_dump_ms {:.1}", start.elapsed().as_secs_f64() * 1e3);
    println!("raw_dump_bytes {}", buf.len());
    jeprof_shim::configure("symbolize:true").unwrap_or_else(|e| fail("configure", &e));
    for pass in ["first", "second"] {
        buf.clear();
        let start = Instant::now();
        jeprof_shim::dump_to(&mut buf).unwrap_or_else(|e| fail("symbolized dump", &e));
        println!(
            "symbolized_dump_ms_{pass} {:.1}",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    println!("symbolized_dump_bytes {}", buf.len());
    let cost = jeprof_shim::stats().last_symbolization.unwrap_or_default();
    println!("symbolized_addresses {}", cost.addresses);
    println!("symbolizer_peak_bytes {}", cost.peak_bytes);
    println!("symbolizer_retained_bytes {}", cost.retained_bytes);
    println!("metadata_bytes {}", jeprof_shim::stats().metadata_bytes);
    black_box(kept);
}

/// The blocks the peak-memory task keeps: the boxes are the point, one allocation (one sample)
/// each.
#[allow(clippy::vec_box)]
type Blocks = Vec<Box<[u8; 64]>>;

/// Allocates `per_stack` blocks from the stack that the bits of `path` choose, `depth` frames of
/// `left`/`right` deep: every `path` below 2^depth is a distinct stack.
#[inline(never)]
fn left(path: u32, depth: u32, per_stack: usize, kept: &mut Blocks) {
    branch(path, depth, per_stack, kept);
    // Keeps the call from being a tail call, and `left` from being merged with `right` (rustc
    // merges functions with identical code).
    black_box(depth ^ 0x5a5a);
}

#[inline(never)]
fn right(path: u32, depth: u32, per_stack: usize, kept: &mut Blocks) {
    branch(path, depth, per_stack, kept);
    black_box(depth ^ 0xa5a5);
}

fn branch(path: u32, depth: u32, per_stack: usize, kept: &mut Blocks) {
    if depth == 0 {
        for _ in 0..per_stack {
            kept.push(Box::new([3u8; 64]));
        }
    } else if path & 1 == 0 {
        left(path >> 1, depth - 1, per_stack, kept);
    } else {
        right(path >> 1, depth - 1, per_stack, kept);
    }
}

fn peak_memory(depth: u32, per_stack: usize) {
    let stacks = 1u32 << depth;
    let mut kept: Blocks = Vec::with_capacity(stacks as usize * per_stack);
    for path in 0..stacks {
        branch(path, depth, per_stack, &mut kept);
    }
    let live_samples_at_peak = jeprof_shim::stats().live_samples;
    drop(kept);
    let stats = jeprof_shim::stats();
    println!("distinct_stacks {}", stats.distinct_stacks);
    println!("live_samples_at_peak {live_samples_at_peak}");
    println!("peak_snapshots {}", stats.peak_snapshots);
    println!("peak_bytes_estimate {}", stats.peak_bytes_estimate);
    println!("peak_tracker_bytes {}", stats.peak_tracker_bytes);
    println!("metadata_bytes {}", stats.metadata_bytes);
    let at_peak = jeprof_shim::peak_snapshot();
    println!("peak_profile_stacks {}", at_peak.stacks.len());
}
