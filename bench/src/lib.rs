//! Measurements of jeprof-shim and jeprof-compat, kept out of the product crates: they carry no
//! measuring features or bench targets, and nothing here is published.
//!
//! - The **churn** (`cargo bench -p jeprof-bench --bench churn`): a multi-threaded allocation churn
//!   under plain jemalloc, the shim in several modes, and jemalloc's own profiler, each mode a
//!   child process ([`modes`]: `churn-plain` or `churn-shim`), interleaved over rounds in a new
//!   random order ([`runner`]), compared with plain jemalloc by paired ratios with bootstrap
//!   intervals and, over code layouts, geometric means ([`stats`], [`tables`]).
//! - **Any allocator** (`cargo bench -p jeprof-bench --bench any_allocator`): the shim's fast path
//!   in front of System, mimalloc and jemalloc, each against the plain allocator, in one process.
//! - The **tools** (`cargo bench -p jeprof-bench --bench compat`): a fleet merge and reports of
//!   `jeprof-compat` against the real jeprof.
//!
//! - **Realistic workloads** ([`realistic`]): work that does more than allocate (a log pipeline
//!   and search index; an in-memory key–value store under a mixed load), run by both children
//!   (`log-index`, `kv-store`) for instruction counts under callgrind and, with the churn runner's
//!   `--workload`, for paired CPU time. With the feature `tantivy`, a third: a search service
//!   on tantivy (`search_service`, built only with the feature; `search-service`), whose
//!   allocations are a real library's.
//!
//! - **Real servers** ([`servers`], the `servers` binary): Debian's redis, memcached and nginx
//!   under their own load generators on loopback, with plain jemalloc, jemalloc's profiler,
//!   `libjeprof_preload.so` and glibc, compared by paired ratios; our profile of each, and our
//!   estimates against heaptrack's exact live bytes.
//! - **Sampling schemes** ([`schemes`], the `scheme-report` binary): per-byte Poisson, Bernoulli,
//!   address and page hashes and a hybrid, replayed over real allocation streams and compared on the
//!   error of their estimates against the exact truth (`bench/schemes/REPORT.md`,
//!   `docs/design.md` §17).
//!
//! Under `cargo test` each bench runs its quick self-check instead ([`self_check`] for the churn),
//! which fails when a mode's child fails or prints nothing. `bench/README.md` says how to run and
//! read them; `bench/RESULTS.md` holds the figures, dated, with the commands that produced them.
//! Benchmarks print ratios; they are never assertions.

#![forbid(unsafe_code)]

pub mod modes;
pub mod realistic;
pub mod runner;
pub mod schemes;
#[cfg(feature = "tantivy")]
pub mod search_service;
pub mod self_check;
pub mod servers;
pub mod stats;
pub mod tables;
pub mod workload;
