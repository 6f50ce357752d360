//! The churn runner: what the shim costs against plain jemalloc and jemalloc's own profiler,
//! measured side by side in one run (never assertions). See `bench/README.md`.
//!
//! ```text
//! cargo bench -p jeprof-bench --bench churn                     # every mode, 9 rounds of 2 x 20 M
//! cargo bench -p jeprof-bench --bench churn -- --help           # the flags
//! cargo bench -p jeprof-bench --bench churn -- --self-check     # a few seconds: does it still run?
//! ```
//!
//! A `[[bench]]` so that `cargo bench` builds its two children (`churn-shim`, `churn-plain`) with
//! the same profile and tells it where they are. `cargo bench` passes `--bench`; without it (under
//! `cargo test`) the runner does its self-check instead of the benchmark.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use jeprof_bench::modes::{self, Binaries};
use jeprof_bench::runner::{self, Plan};
use jeprof_bench::stats::Xorshift;
use jeprof_bench::workload::Churn;
use jeprof_bench::{self_check, tables};

/// The churn: plain jemalloc, the shim in several modes, and jemalloc's profiler, each mode a
/// process of its own, interleaved over rounds; CPU time compared with plain jemalloc's.
#[derive(Parser)]
#[command(
    name = "churn",
    bin_name = "cargo bench -p jeprof-bench --bench churn --",
    after_help = "\
Examples (after `cargo bench -p jeprof-bench --bench churn --`):
  (nothing)               every mode, 9 rounds of 2 x 20 M, then the sample cost and the dump
  --modes again,off,fp --rounds 2000 --allocations 2000000
                          tight intervals for three rows (many short rounds)
  --warmup 200000 --modes again,off,fp --rounds 200 --allocations 2000000
                          steady state: the cost per allocation of a long-running process
  --modes off,fp --rates 131072,2097152,67108864 --rounds 600 --allocations 2000000
                          the cost per sample, read off several periods
  --layouts target/layouts --warmup 200000 --modes again,off,fp --rounds 200
                          averaged over code layouts (bench/build-layouts.sh)
Build with RUSTFLAGS=\"-C force-frame-pointers=yes\" so the fp unwinder sees whole stacks.
Exit status: 0; 1 when a child failed or the self-check found a problem; 2 on bad flags."
)]
struct Cli {
    /// Rounds; every mode runs once per round, in a new random order each round.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Allocations per thread in each timed churn.
    #[arg(long, default_value_t = 20_000_000)]
    allocations: u64,
    /// Threads of the churn.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: u64,
    /// Allocations per thread before the timed part, in every child; then only what follows is
    /// timed, on the threads' own CPU clocks (steady state: one-time costs fall in the warm-up),
    /// and the set-up table is left out.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// Allocations per thread of the tiny churn that measures each mode's one-time set-up.
    #[arg(long, default_value_t = 2_000)]
    setup_allocations: u64,
    /// Only these modes (comma-separated keys, see --list-modes) besides plain jemalloc, and only
    /// the churn (no sample cost, no dump).
    #[arg(long, value_delimiter = ',', value_parser = mode_key)]
    modes: Option<Vec<String>>,
    /// Adds the frame-pointer mode at each of these sampling periods (bytes, comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    rates: Vec<u64>,
    /// Runs every mode with each code layout's binaries under DIR (built by
    /// bench/build-layouts.sh) and adds a table averaged over the layouts.
    #[arg(long, value_name = "DIR")]
    layouts: Option<PathBuf>,
    /// Seeds the run order of the rounds and the bootstrap.
    #[arg(long, default_value_t = 0x9E37_79B9_7F4A_7C15)]
    seed: u64,
    /// Prints the modes (key, binary, settings, description) and exits.
    #[arg(long)]
    list_modes: bool,
    /// Runs every mode, the layout table, the sample cost and the dump on a tiny workload, and
    /// fails when a child fails or prints nothing (what runs without --bench, under cargo test).
    #[arg(long)]
    self_check: bool,
    /// Times a realistic workload instead of the churn: the children's task and its flags, as
    /// one argument (`log-index`, `kv-store --operations 100000`; see `churn-shim --help`). No
    /// set-up table, no sample cost, no dump.
    #[arg(long, value_name = "TASK")]
    workload: Option<String>,
    /// Given by `cargo bench`: run the benchmark (without it, the self-check).
    #[arg(long, hide = true)]
    bench: bool,
}

/// A `--modes` key of the table.
fn mode_key(key: &str) -> Result<String, String> {
    let key = key.trim();
    match modes::spec(key) {
        Some(_) => Ok(key.to_string()),
        None => Err(format!("not a mode (known: {})", modes::known_keys())),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list_modes {
        print!("{}", modes::describe());
        return ExitCode::SUCCESS;
    }
    let binaries = Binaries {
        plain: PathBuf::from(env!("CARGO_BIN_EXE_churn-plain")),
        shim: PathBuf::from(env!("CARGO_BIN_EXE_churn-shim")),
    };
    if cli.self_check || !cli.bench {
        return match self_check::run(&binaries) {
            Ok(report) => {
                print!("{report}");
                println!("\nchurn self-check: ok");
                ExitCode::SUCCESS
            }
            Err((report, problems)) => {
                print!("{report}");
                eprintln!("\nchurn self-check failed:");
                for p in problems {
                    eprintln!("  {p}");
                }
                ExitCode::FAILURE
            }
        };
    }
    benchmark(&cli, &binaries)
}

fn benchmark(cli: &Cli, binaries: &Binaries) -> ExitCode {
    let layouts = match &cli.layouts {
        None => Vec::new(),
        Some(dir) => {
            let found = runner::layouts(dir);
            if found.is_empty() {
                eprintln!(
                    "--layouts: {} holds no layout (a subdirectory with churn-shim and \
                     churn-plain); build some with bench/build-layouts.sh",
                    dir.display()
                );
                return ExitCode::from(2);
            }
            found
        }
    };
    let modes = match modes::select(cli.modes.as_deref(), &cli.rates) {
        Ok(modes) => modes,
        Err(e) => {
            eprintln!("--modes: {e}");
            return ExitCode::from(2);
        }
    };
    if cfg!(debug_assertions) {
        println!("warning: built without optimisation; run it with `cargo bench`");
    }
    let workload: Option<Vec<String>> = cli
        .workload
        .as_deref()
        .map(|w| w.split_whitespace().map(str::to_string).collect());
    if let Some(args) = &workload {
        let task = args.first().map_or("", String::as_str);
        if !["log-index", "kv-store"].contains(&task) {
            eprintln!("--workload: `{task}` is not a workload (known: log-index, kv-store)");
            return ExitCode::from(2);
        }
    }
    let plan = Plan {
        entries: runner::entries(&modes, binaries, &layouts),
        churn: Churn {
            threads: cli.threads,
            allocations: cli.allocations,
            warmup: cli.warmup,
        },
        setup_allocations: (cli.warmup == 0 && workload.is_none()).then_some(cli.setup_allocations),
        workload,
        rounds: cli.rounds as usize,
        seed: cli.seed,
        progress: true,
    };
    print!("{}", tables::header(&plan));
    let m = runner::run(&plan);
    let mut rng = Xorshift::new(cli.seed);
    print!("{}", tables::ratios(&plan, &m, &mut rng));
    print!("{}", tables::layout_means(&plan, &m, &mut rng));
    print!("{}", tables::setup(&plan, &m, &mut rng));
    let mut failed = !m.failures.is_empty();
    if cli.modes.is_none() && cli.workload.is_none() {
        failed |= !extras(&binaries.shim);
    }
    if !m.failures.is_empty() {
        eprintln!("\n{} runs failed:", m.failures.len());
        for f in &m.failures {
            eprintln!("  {f}");
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The cost of one sampled allocation per unwinder, and the time of a dump. False when a child
/// failed.
fn extras(shim: &Path) -> bool {
    let mut ok = true;
    println!(
        "\ncost of one sampled allocation (capture + record), 32 frames, every allocation sampled:"
    );
    for unwinder in ["fp", "eh_frame", "backtrace"] {
        match runner::sample_cost(shim, unwinder, 20_000) {
            Ok(out) => println!(
                "  {unwinder:<10} {} ns per sampled allocation ({} ns unsampled), {} frames captured",
                out.get("sampled_ns").unwrap_or("-"),
                out.get("unsampled_ns").unwrap_or("-"),
                out.get("frames").unwrap_or("-"),
            ),
            Err(e) => {
                println!("  {unwinder}: failed: {e}");
                ok = false;
            }
        }
    }
    println!("\ndump of 100,000 live samples:");
    match runner::dump(shim, 100_000) {
        Ok(out) => {
            for (k, v) in &out.0 {
                println!("  {k:<32} {v}");
            }
        }
        Err(e) => {
            println!("  failed: {e}");
            ok = false;
        }
    }
    ok
}
