//! The churn under exact scope attribution: `jeprof_shim::ExactScopes<Jemalloc>` (a header before
//! every block, three atomics per scoped allocation), for comparison with plain jemalloc
//! (`churn-plain`) and with sampled scopes (`churn-shim churn-scoped`). Prints `key value` lines.

use jeprof_bench::workload::{self, Churn};

#[global_allocator]
static ALLOC: jeprof_shim::ExactScopes<tikv_jemallocator::Jemalloc> =
    jeprof_shim::ExactScopes::new(tikv_jemallocator::Jemalloc);

/// The churn with each thread in a scope, every block charged exactly.
#[derive(clap::Parser)]
#[command(name = "churn-exact")]
struct Cli {
    #[command(flatten)]
    churn: Churn,
    /// Distinct scopes the threads are spread over (0: none; blocks still carry the header).
    #[arg(long, default_value_t = 2)]
    scopes: u64,
}

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    workload::print_timing(&workload::run_in_scopes(&cli.churn, cli.scopes));
    for s in jeprof_shim::exact_scopes() {
        println!(
            "scope {} live_bytes {} live_objects {} allocated_bytes {}",
            s.label, s.live_bytes, s.live_objects, s.allocated_bytes
        );
    }
}
