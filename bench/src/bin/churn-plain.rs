//! Child of the churn runner (`cargo bench -p jeprof-bench --bench churn`): the churn on plain
//! `tikv_jemallocator::Jemalloc`, the baseline, and jemalloc's own profiler with
//! `_RJEM_MALLOC_CONF=prof:true,lg_prof_sample:19`. It prints `key value` lines.

use clap::{Parser, Subcommand};
use jeprof_bench::realistic::{self, KvStore, LogIndex};
use jeprof_bench::workload::{self, Churn};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Child of the churn runner on plain jemalloc; jemalloc's settings in `_RJEM_MALLOC_CONF`.
#[derive(Parser)]
#[command(name = "churn-plain")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The churn; prints elapsed_ns, cpu_ns, and whether jemalloc's profiler was on
    /// (jemalloc_prof, lg_prof_sample).
    Churn(Churn),
    /// The log pipeline and search index (`jeprof_bench::realistic`); prints its checksum,
    /// elapsed_ns, cpu_ns, and whether jemalloc's profiler was on.
    LogIndex(LogIndex),
    /// The key–value store under a mixed load; prints the same.
    KvStore(KvStore),
}

fn main() {
    match Cli::parse().task {
        Task::Churn(churn) => workload::print_timing(&workload::run(&churn)),
        Task::LogIndex(shape) => realistic::run_timed(|| realistic::log_index(&shape)),
        Task::KvStore(load) => realistic::run_timed(|| realistic::kv_store(&load)),
    }
    // After the timed part: whether the profiler the mode is about really ran (a jemalloc built
    // without it rejects `prof:true` with only a warning).
    let prof = tikv_jemalloc_ctl::profiling::prof::read().unwrap_or(false);
    println!("jemalloc_prof {prof}");
    if prof {
        if let Ok(lg) = tikv_jemalloc_ctl::profiling::lg_prof_sample::read() {
            println!("lg_prof_sample {lg}");
        }
    }
}
