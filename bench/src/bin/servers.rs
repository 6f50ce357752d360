//! The server harness (`jeprof_bench::servers`): Debian's redis, memcached and nginx under their
//! own load generators, with plain jemalloc, jemalloc's profiler, our preload library and glibc.
//!
//! ```text
//! cargo build --release -p jeprof-preload -p jeprof-compat -p jeprof-bench --bin servers
//! target/release/servers table --rounds 10      # the overhead table and our profile's top sites
//! target/release/servers heaptrack              # our estimates against heaptrack's live bytes
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use jeprof_bench::servers::{
    self, compare_with_heaptrack, format_accuracy, format_table, run_table, ServerKind, Settings,
    Variant,
};
use jeprof_bench::stats::Xorshift;

/// Real servers under load: what each allocator and profiler costs them, and how our profile of
/// them compares with heaptrack's.
#[derive(Parser)]
#[command(
    name = "servers",
    after_help = "Exit status: 0; 1 when a run failed; 2 on bad flags."
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Every server under every variant, in alternating rounds; a Markdown table of throughput,
    /// latency and server CPU per request with paired ratios to plain jemalloc, then the top
    /// functions of our last dump of each server.
    Table(TableArgs),
    /// Each server under heaptrack with our library behind it, on a bigger load: heaptrack's
    /// live bytes per function at exit against our estimates and 95% intervals.
    Heaptrack(HeaptrackArgs),
}

#[derive(Args)]
struct Common {
    /// Servers, comma-separated: redis, memcached, nginx.
    #[arg(long, value_delimiter = ',', default_value = "redis,memcached,nginx", value_parser = ServerKind::parse)]
    servers: Vec<ServerKind>,
    /// Our preload library.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/libjeprof_preload.so"))]
    preload: PathBuf,
    /// Debian's jemalloc (with profiling).
    #[arg(long, default_value = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")]
    libjemalloc: PathBuf,
    /// Our mean sampling period in bytes.
    #[arg(long, default_value_t = 524_288)]
    rate: u64,
    /// jeprof-compat, for the reports of our dumps.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/jeprof-compat"))]
    jeprof_compat: PathBuf,
    /// Where the servers' directories go (kept: dumps, traces, logs); a new temporary directory,
    /// removed at the end, when not given.
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Args)]
struct TableArgs {
    #[command(flatten)]
    common: Common,
    /// Variants, comma-separated: jemalloc (always runs: the baseline), again, jemalloc-prof,
    /// ours, glibc.
    #[arg(long, value_delimiter = ',', default_value = "jemalloc,again,jemalloc-prof,ours,glibc", value_parser = Variant::parse)]
    variants: Vec<Variant>,
    /// Rounds: every variant runs once per round, in a new random order.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Requests per redis-benchmark test.
    #[arg(long, default_value_t = 20_000)]
    redis_requests: u64,
    /// memcslap's operations per client thread (20 threads), for each of set and get.
    #[arg(long, default_value_t = 2_500)]
    memcached_per_thread: u64,
    /// Seconds of each wrk run (static file, proxy).
    #[arg(long, default_value_t = 2)]
    nginx_seconds: u64,
    /// Rows of each profile's top functions.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Seeds the run order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct HeaptrackArgs {
    #[command(flatten)]
    common: Common,
    /// Rows of each comparison printed (coverage counts them all).
    #[arg(long, default_value_t = 12)]
    top: usize,
    /// Functions with less than this share of the live bytes are left out.
    #[arg(long, default_value_t = 0.01)]
    min_share: f64,
}

fn settings(c: &Common) -> Settings {
    Settings {
        libjemalloc: c.libjemalloc.clone(),
        rate: c.rate,
        ..Settings::debian(c.preload.clone())
    }
}

/// The directory runs go in, and the temporary directory that owns it when none was given.
fn work_dir(c: &Common) -> Result<(PathBuf, Option<tempfile::TempDir>), String> {
    match &c.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            Ok((d.clone(), None))
        }
        None => {
            let t = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

fn table(a: &TableArgs) -> Result<bool, String> {
    let mut s = settings(&a.common);
    s.redis_requests = a.redis_requests;
    s.memcached_per_thread = a.memcached_per_thread;
    s.nginx_seconds = a.nginx_seconds;
    let mut variants = vec![Variant::Jemalloc];
    variants.extend(a.variants.iter().filter(|v| **v != Variant::Jemalloc));
    let (dir, _owner) = work_dir(&a.common)?;
    let started = std::time::Instant::now();
    let (table, failures) = run_table(
        &a.common.servers,
        &variants,
        a.rounds as usize,
        &s,
        &dir,
        a.seed,
        true,
    );
    println!(
        "{} rounds, variants in a new random order each round; {:.0} s in all\n",
        a.rounds,
        started.elapsed().as_secs_f64()
    );
    print!("{}", format_table(&table, &mut Xorshift::new(a.seed)));
    for f in &failures {
        println!("FAILED: {f}");
    }
    for &kind in &a.common.servers {
        let last = table
            .get(&(kind, Variant::Ours))
            .and_then(|runs| runs.iter().rev().flatten().find_map(|r| r.profile.clone()));
        let Some(dump) = last else { continue };
        let report = servers::jeprof_compat_report(
            &a.common.jeprof_compat,
            &[
                "--show_bytes".to_string(),
                "--nodecount".to_string(),
                a.top.to_string(),
                dump.display().to_string(),
            ],
        )?;
        println!("\n{} (ours, last run), `jeprof-compat report --show_bytes --nodecount {}`:\n```\n{}```", kind.key(), a.top, report);
    }
    Ok(failures.is_empty())
}

fn heaptrack(a: &HeaptrackArgs) -> Result<bool, String> {
    let s = settings(&a.common);
    let (dir, _owner) = work_dir(&a.common)?;
    let mut ok = true;
    for &kind in &a.common.servers {
        match compare_with_heaptrack(kind, &s, &dir, &a.common.jeprof_compat, a.min_share) {
            Ok(acc) => println!(
                "{}\n(files in {})\n",
                format_accuracy(&acc, a.top),
                acc.dir.display()
            ),
            Err(e) => {
                println!("FAILED: {}: {e}", kind.key());
                ok = false;
            }
        }
    }
    Ok(ok)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.task {
        Task::Table(a) => table(a),
        Task::Heaptrack(a) => heaptrack(a),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("servers: {e}");
            ExitCode::from(1)
        }
    }
}
