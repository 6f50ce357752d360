//! What `dump_near_limit`'s watcher knows ([`crate::Stats::near_limit`]).

use std::path::PathBuf;

/// The memory limit the watcher compares with, the use it last read, and the last near-limit
/// dump. Every figure is 0 and `watch` is [`NearLimitWatch::Off`] while `dump_near_limit` is off.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct NearLimitStats {
    /// How the watcher learns of the use (or why it does not watch).
    pub watch: NearLimitWatch,
    /// The cgroup that holds the limit, as `/proc/self/cgroup` writes paths (`None`: no limit).
    pub cgroup: Option<String>,
    /// 1 or 2: the cgroup interface of the limit (0: no limit).
    pub cgroup_version: u8,
    /// The tightest hard limit in bytes (v1 `memory.limit_in_bytes`, v2 `memory.max`; 0: none).
    pub limit_bytes: u64,
    /// The use of that cgroup in bytes (v1 `memory.usage_in_bytes`, v2 `memory.current`), read
    /// when these statistics were taken.
    pub use_bytes: u64,
    /// The use at which a dump is written: `⌈F × limit⌉`.
    pub threshold_bytes: u64,
    /// The use below which the watcher re-arms after a dump: `threshold − limit / 20`.
    pub rearm_bytes: u64,
    /// Near-limit dumps written by this process.
    pub dumps: u64,
    /// The last of them.
    pub last_dump: Option<NearLimitDump>,
}

/// How the watcher learns of the use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NearLimitWatch {
    /// `dump_near_limit` is off (or the watcher has not started yet).
    #[default]
    Off,
    /// No cgroup limits this process's memory: nothing to watch, and no dump will be written.
    NoLimit,
    /// cgroup v1 memory thresholds: the kernel signals an eventfd when the use crosses the
    /// threshold or the re-arm level; the watcher sleeps otherwise.
    Eventfd,
    /// The use is read every 20 ms (cgroup v2, which has no thresholds, with `memory.events`
    /// changes waking the wait at once; or v1 where the thresholds cannot be registered).
    Poll,
}

/// Why a near-limit dump was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NearLimitSignal {
    /// The use reached `dump_near_limit` of the limit.
    Threshold,
    /// cgroup v2 `memory.events` counted a new `high` event (throttling began).
    High,
    /// cgroup v2 `memory.events` counted a new `max` event (the limit was reached).
    Max,
}

/// One near-limit dump.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NearLimitDump {
    /// Where it was written (`<dump_prefix>.<pid>.<seq>.l<n>.heap`).
    pub path: PathBuf,
    /// When the signal was seen, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The use that the watcher read then.
    pub use_bytes: u64,
    /// What fired.
    pub signal: NearLimitSignal,
    /// From the signal to the file fsynced and renamed into place, in microseconds.
    pub write_micros: u64,
    /// Bytes the writing thread allocated for the dump, all freed after it (jemalloc's
    /// `thread.allocated` difference; 0 when the profiler's jemalloc does not serve that thread):
    /// an upper bound of the dump's heap peak.
    pub heap_bytes: u64,
    /// The file's size: page cache charged to the cgroup as well, until written back and
    /// reclaimed.
    pub file_bytes: u64,
}
