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
    /// The search service on tantivy (`jeprof_bench::search_service`, feature `tantivy`); prints
    /// the same.
    #[cfg(feature = "tantivy")]
    SearchService(jeprof_bench::search_service::SearchService),
}

fn main() {
    match Cli::parse().task {
        Task::Churn(churn) => workload::print_timing(&workload::run(&churn)),
        Task::LogIndex(shape) => realistic::run_timed(|| realistic::log_index(&shape)),
        Task::KvStore(load) => realistic::run_timed(|| realistic::kv_store(&load)),
        #[cfg(feature = "tantivy")]
        Task::SearchService(load) => realistic::run_timed(|| {
            jeprof_bench::search_service::search_service(&load).expect("the search service")
        }),
    }
    // After the timed part: whether the profiler the mode is about really ran (a jemalloc built
    // without it rejects `prof:true` with only a warning). Asked only when jemalloc's settings
    // name its profiler: the first `mallctl` initialises jemalloc's control tree (about 0.2 M
    // instructions), which plain jemalloc's whole-process count under callgrind must not carry
    // when the shim's run does not (`bench/service-callgrind.sh`). Unnamed, the profiler is off:
    // `prof` defaults to false and the environment is where this build takes settings from.
    let asked = std::env::var("_RJEM_MALLOC_CONF").is_ok_and(|conf| conf.contains("prof"));
    let prof = asked && tikv_jemalloc_ctl::profiling::prof::read().unwrap_or(false);
    println!("jemalloc_prof {prof}");
    if prof {
        if let Ok(lg) = tikv_jemalloc_ctl::profiling::lg_prof_sample::read() {
            println!("lg_prof_sample {lg}");
        }
    }
}
