//! The profiler's own figures ([`crate::stats`]).

use super::capture::Unwinder;
use super::near_limit::NearLimitStats;
use super::otlp_stats::OtlpPushStats;
use super::sampled_path::Dropped;
use super::symbolize::SymbolizerCost;

/// A snapshot of the profiler's own state.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Sampled objects currently live.
    pub live_samples: u64,
    /// Distinct stacks recorded since start.
    pub distinct_stacks: u64,
    /// Bytes held by the profiler's tables (capacity).
    pub metadata_bytes: u64,
    /// Samples recorded since start.
    pub samples_taken: u64,
    /// Per-thread tables held: at most as many as threads ever sampled at once (an exited
    /// thread's table, with its figures, is taken over by the next new thread).
    pub thread_tables: u64,
    /// Samples dropped since start, by reason.
    pub dropped: Dropped,
    /// The configured mean sampling period R in bytes (0 = off).
    pub sample_rate: u64,
    /// Whether sampling is active.
    pub active: bool,
    /// The unwinder in use.
    pub unwinder: Unwinder,
    /// Bytes of the sampled arena's range handed to jemalloc.
    pub arena_bytes_used: u64,
    /// Size of the sampled arena's reserved range (0 until the first sample).
    pub arena_bytes_reserved: u64,
    /// Cost of the last in-process symbolization, if one ran.
    pub last_symbolization: Option<SymbolizerCost>,
    /// Estimated bytes allocated since start (sum of the samples' rounded weights): what
    /// `dump_interval` counts.
    pub allocated_bytes_estimate: u64,
    /// Estimated live bytes (sum of the live samples' rounded weights): what the peak tracker and
    /// `dump_peak` watch.
    pub live_bytes_estimate: u64,
    /// Estimated live bytes of the peak tracker's snapshot ([`crate::peak_snapshot`]; 0 before
    /// the first sample).
    pub peak_bytes_estimate: u64,
    /// Snapshots the peak tracker took since start.
    pub peak_snapshots: u64,
    /// Bytes the peak tracker's snapshot holds (capacity; also counted in `metadata_bytes`).
    pub peak_tracker_bytes: u64,
    /// Bytes the leak history holds (capacity; also counted in `metadata_bytes`): at most
    /// `leak_history × (2048 × 20 + 48)`, the crate docs' bound.
    pub leak_history_bytes: u64,
    /// Snapshots the leak history recorded since start, the dropped ones included.
    pub leak_snapshots: u64,
    /// What `otlp_push` has done: profiles built, sent, failed attempts, dropped, queued.
    pub otlp: OtlpPushStats,
    /// The listener the `http` setting asked for: serving, or why it could not start.
    pub http_listener: ListenerState,
    /// `dump_near_limit`: the memory limit, the use, and the last near-limit dump.
    pub near_limit: NearLimitStats,
}

/// The state of the listener the `http` setting asks for ([`Stats::http_listener`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ListenerState {
    /// No `http` setting has asked for a listener (or the build has no `http` feature).
    #[default]
    NotAsked,
    /// Serving on this address (a host name in the setting is resolved to it).
    Serving(std::net::SocketAddr),
    /// The last `http` setting's listener could not start: the OS's reason (`AddrInUse` for a
    /// port another process holds, `NotFound` for a host name that does not resolve). The
    /// program runs on without it; `configure("http:...")` may try another address.
    Failed(std::io::ErrorKind),
}
