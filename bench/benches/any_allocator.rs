//! The shim's fast path in front of any allocator: what `Profiled<A>` adds to `A` itself, for the
//! system allocator, mimalloc and jemalloc, measured side by side in one process (never
//! assertions).
//!
//! ```text
//! cargo bench -p jeprof-bench --bench any_allocator                    # 15 rounds of 2 M
//! cargo bench -p jeprof-bench --bench any_allocator -- --help          # the flags
//! valgrind --tool=callgrind target/release/deps/any_allocator-HASH --bench --rounds 1 \
//!     --allocations 400000 && callgrind_annotate --inclusive=yes callgrind.out.PID | grep churn_
//! ```
//!
//! The loop is the churn's (`jeprof_bench::workload`) on one thread: 1,024 live blocks, each step
//! frees a random one and allocates another of 16–4096 bytes. It calls each allocator's
//! `GlobalAlloc` methods directly, in one function per allocator (`churn_system`,
//! `churn_shim_system`, ...), so that all six run in one process (a global allocator is fixed per
//! binary) and callgrind counts each function's instructions on its own: the difference between
//! `churn_shim_A` and `churn_A`, over the pairs it prints, is the fast path's instructions per
//! allocation–free pair. Sampling is off unless `--sample-rate` says otherwise: the fast path
//! alone is measured (the cost of a sample does not depend on `A`; the churn bench measures it).
//! Under `cargo test` (no `--bench`) it runs a tiny round of each as a self-check.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::process::ExitCode;

use clap::Parser;
use jeprof_bench::stats::{self, Xorshift};
use jeprof_bench::workload::{thread_cpu_time, LIVE_PER_THREAD, MAX_SIZE, MIN_SIZE};
use jeprof_shim::Profiled;
use mimalloc::MiMalloc;
use tikv_jemallocator::Jemalloc;

/// The fast path of `Profiled<A>` against `A`, for System, mimalloc and jemalloc, in one process.
#[derive(Parser)]
#[command(
    name = "any_allocator",
    bin_name = "cargo bench -p jeprof-bench --bench any_allocator --"
)]
struct Cli {
    /// Rounds; every allocator runs once per round, in a new random order each round.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Allocations (each with the free of the block it replaces) per allocator and round.
    #[arg(long, default_value_t = 2_000_000)]
    allocations: u64,
    /// The shim's mean sampling period in bytes; 0 (the default) measures the fast path alone.
    #[arg(long, default_value_t = 0)]
    sample_rate: u64,
    /// Seeds the run order and the bootstrap.
    #[arg(long, default_value_t = 0x9E37_79B9_7F4A_7C15)]
    seed: u64,
    /// Given by `cargo bench`: run the benchmark (without it, a tiny self-check).
    #[arg(long, hide = true)]
    bench: bool,
}

static SYSTEM: System = System;
static SHIM_SYSTEM: Profiled<System> = Profiled::new(System);
static MIMALLOC: MiMalloc = MiMalloc;
static SHIM_MIMALLOC: Profiled<MiMalloc> = Profiled::new(MiMalloc);
static JEMALLOC: Jemalloc = Jemalloc;
static SHIM_JEMALLOC: Profiled<Jemalloc> = Profiled::new(Jemalloc);

/// One function per allocator, named for it, so that callgrind counts each on its own (the
/// instances of a generic function share one name there).
macro_rules! churn_on {
    ($($name:ident: $alloc:expr;)*) => {$(
        #[inline(never)]
        fn $name(allocations: u64) -> u64 {
            churn(&$alloc, allocations)
        }
    )*};
}

churn_on! {
    churn_system: SYSTEM;
    churn_shim_system: SHIM_SYSTEM;
    churn_mimalloc: MIMALLOC;
    churn_shim_mimalloc: SHIM_MIMALLOC;
    churn_jemalloc: JEMALLOC;
    churn_shim_jemalloc: SHIM_JEMALLOC;
}

/// One allocator of the table: its label, and its churn.
struct Row {
    label: &'static str,
    /// The row its ratio is taken against (itself for a plain allocator).
    plain: usize,
    churn: fn(u64) -> u64,
}

const ROWS: [Row; 6] = [
    Row {
        label: "System",
        plain: 0,
        churn: churn_system,
    },
    Row {
        label: "Profiled<System>",
        plain: 0,
        churn: churn_shim_system,
    },
    Row {
        label: "MiMalloc",
        plain: 2,
        churn: churn_mimalloc,
    },
    Row {
        label: "Profiled<MiMalloc>",
        plain: 2,
        churn: churn_shim_mimalloc,
    },
    Row {
        label: "Jemalloc",
        plain: 4,
        churn: churn_jemalloc,
    },
    Row {
        label: "Profiled<Jemalloc>",
        plain: 4,
        churn: churn_shim_jemalloc,
    },
];

/// `allocations` steps of the churn on `alloc`, then every block freed; returns a checksum of the
/// addresses so that nothing can be elided.
#[inline(always)]
fn churn<A: GlobalAlloc>(alloc: &A, allocations: u64) -> u64 {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut slots: [(usize, usize); LIVE_PER_THREAD] = [(0, 0); LIVE_PER_THREAD];
    let mut checksum = 0u64;
    for _ in 0..allocations {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let slot = (state as usize) % LIVE_PER_THREAD;
        let size = MIN_SIZE + ((state >> 32) as usize) % (MAX_SIZE - MIN_SIZE + 1);
        let (old, old_size) = slots[slot];
        if old != 0 {
            // SAFETY: `old` was allocated below by `alloc` with this layout (size ≥ 16, align 8)
            // and is freed once: the slot is overwritten next.
            unsafe {
                alloc.dealloc(
                    old as *mut u8,
                    Layout::from_size_align_unchecked(old_size, 8),
                )
            };
        }
        // SAFETY: 16 ≤ size ≤ 4096 with alignment 8 is a valid, non-zero layout.
        let ptr = unsafe { alloc.alloc(Layout::from_size_align_unchecked(size, 8)) };
        assert!(!ptr.is_null(), "out of memory");
        // SAFETY: ptr is valid for size ≥ 1 bytes. Touching the block keeps the allocation.
        unsafe { ptr.write(state as u8) };
        checksum = checksum.wrapping_add(black_box(ptr) as u64);
        slots[slot] = (ptr as usize, size);
    }
    for (ptr, size) in slots {
        if ptr != 0 {
            // SAFETY: as above.
            unsafe { alloc.dealloc(ptr as *mut u8, Layout::from_size_align_unchecked(size, 8)) };
        }
    }
    checksum
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    jeprof_shim::set_sample_rate(cli.sample_rate);
    let (rounds, allocations) = if cli.bench {
        (cli.rounds, cli.allocations)
    } else {
        (1, 10_000)
    };
    if cli.bench && cfg!(debug_assertions) {
        println!("warning: built without optimisation; run it with `cargo bench`");
    }
    println!(
        "one thread, {allocations} allocation–free pairs per allocator and round, {rounds} rounds, \
         sample_rate {}",
        cli.sample_rate
    );
    // Warm-up: every allocator's first pages and thread caches, outside what is timed.
    let warmup = allocations.min(100_000);
    for row in &ROWS {
        black_box((row.churn)(warmup));
    }
    let mut rng = Xorshift::new(cli.seed);
    let mut cpu_ns: Vec<Vec<f64>> = vec![Vec::new(); ROWS.len()];
    let mut order: Vec<usize> = (0..ROWS.len()).collect();
    for _ in 0..rounds {
        rng.shuffle(&mut order);
        for &i in &order {
            let before = thread_cpu_time();
            black_box((ROWS[i].churn)(allocations));
            cpu_ns[i].push((thread_cpu_time() - before).as_nanos() as f64);
        }
    }
    println!(
        "\n{:<20} {:>16} {:>10} {:>20}",
        "allocator", "ns per pair", "ratio", "95% interval"
    );
    for (i, row) in ROWS.iter().enumerate() {
        let per_pair: Vec<f64> = cpu_ns[i].iter().map(|ns| ns / allocations as f64).collect();
        let ns = stats::median(&per_pair).unwrap_or(f64::NAN);
        if row.plain == i {
            println!("{:<20} {ns:>16.1} {:>10} {:>20}", row.label, "1", "");
            continue;
        }
        let ratios: Vec<f64> = cpu_ns[i]
            .iter()
            .zip(&cpu_ns[row.plain])
            .map(|(m, b)| m / b)
            .collect();
        let ratio = stats::median(&ratios).unwrap_or(f64::NAN);
        let interval = stats::bootstrap_median_interval(&ratios, &mut rng)
            .map_or("-".to_string(), |(lo, hi)| format!("{lo:.3}–{hi:.3}"));
        println!(
            "{:<20} {ns:>16.1} {:>10} {interval:>20}",
            row.label,
            format!("{ratio:.3}×")
        );
    }
    // What callgrind's inclusive count of each `churn_*` function covers.
    println!(
        "\n{} pairs per allocator in all, the warm-up included; samples taken {}",
        warmup + rounds * allocations,
        jeprof_shim::stats().samples_taken
    );
    if !cli.bench {
        println!("any_allocator self-check: ok");
    }
    ExitCode::SUCCESS
}
