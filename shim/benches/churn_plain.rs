//! Helper of the `churn` bench: the churn workload on plain `tikv_jemallocator::Jemalloc` (run
//! with `_RJEM_MALLOC_CONF=prof:true,lg_prof_sample:19` for jemalloc's own profiler). The `churn`
//! bench runs it as a child; run on its own it only says so.

#[path = "support/workload.rs"]
mod workload;

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let Some(per_thread) = std::env::var("CHURN_ALLOCATIONS").ok() else {
        println!("churn_plain: a helper of `cargo bench -p jeprof-shim --bench churn`");
        return;
    };
    workload::run_and_report(2, per_thread.parse().unwrap(), || {});
}
