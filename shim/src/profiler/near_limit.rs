//! `dump_near_limit:F`: a dump of kind `l` when the memory use of the cgroup that would kill the
//! process first reaches F of its limit, before the OOM killer ends the process and the profile
//! that explains it is lost.
//!
//! # The watcher
//! A thread of its own (started as the other background threads are, outside any allocation:
//! before `main`, by `configure`, in a forked child), inside the re-entrancy guard for its whole
//! life. It finds the limit once ([`cgroup::discover`]), then waits for the kernel:
//!
//! - cgroup v1: two memory thresholds on the limit's cgroup (`cgroup.event_control`), at the
//!   threshold `⌈F × limit⌉` and at the re-arm level `threshold − limit / 20`, signal one eventfd
//!   when the use crosses either, in either direction; the watcher sleeps in `read` otherwise, so
//!   an idle process pays nothing (no wake-up at all). The kernel checks thresholds every 128
//!   pages charged or uncharged per CPU (512 KiB with 4 KiB pages), far inside the margin.
//! - cgroup v2 (no thresholds) or a v1 whose thresholds cannot be registered: the use is read
//!   every [`POLL`]; under v2 the wait is a `poll` on `memory.events`, whose changes (a `high` or
//!   `max` event) end it at once.
//!
//! PSI triggers (`memory.pressure`, `/proc/pressure/memory`) are not used: they measure time
//! stalled in reclaim, not a fraction of the limit, and a process growing into its limit without
//! swap is killed with almost no stall before it (the kernel reclaims little when nothing is
//! reclaimable), so they would fire late or not at all where this dump matters most.
//!
//! # Once per crossing
//! [`Arm::step`]: armed, a use at or above the threshold (or a new v2 `high` or `max` event)
//! writes one dump and disarms; disarmed, nothing is written until the use falls below the re-arm
//! level, 5% of the limit under the threshold (a process hovering at the threshold is not dumped
//! at every page; a process that freed a twentieth of its limit and grows again is).
//!
//! # The dump near the limit
//! Memory is what the process lacks then, so the dump is written without the in-process
//! symbolizer (whose peak is megabytes of debug information): the frames stay addresses, the
//! dump carries the memory map and each object's build id, and `jeprof-compat` (or `jeprof
//! <binary>`) names them later. What remains is the snapshot's copy of the tables, bounded by
//! them (`stats().metadata_bytes`), the text written through a 64 KiB buffer, and the file's page
//! cache; the write is fsynced and renamed before [`write_dump`] returns. Annotations say the
//! limit, the use, the cgroup, its version, the signal, and the bytes the snapshot allocated.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant, SystemTime};

use super::auto_dump::{self, Kind};
use super::report;
use crate::api::near_limit::{NearLimitDump, NearLimitSignal, NearLimitWatch};
use crate::base::settings;
use crate::base::sync::lock;
use crate::base::thread::{self, Guard};
use crate::parts::cgroup::{self, version_number, Limit, Version, STATE};

/// The poll period where the kernel offers no threshold: 20 ms, 8 MB at 400 MB/s (2% of a
/// 400 MiB limit), well inside the 20% a `dump_near_limit:0.8` leaves before the kill.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// pid of the process whose watcher thread runs (0: none).
static WATCHER_PID: AtomicU32 = AtomicU32::new(0);

/// Starts this process's watcher if `dump_near_limit` asks for one and none runs. Call only
/// outside an allocation (it spawns a thread).
pub(crate) fn ensure_watcher() {
    if settings::dump_near_limit() <= 0.0 {
        return;
    }
    thread::spawn_once_per_process(&WATCHER_PID, "jeprof-shim-limit", "memory-limit", watcher);
}

/// In a forked child: the child's own watcher, and none of the parent's dumps.
pub(crate) fn after_fork_child() {
    let mut state = lock(&STATE);
    state.dumps = 0;
    state.last_dump = None;
    drop(state);
    ensure_watcher();
}

/// The threshold `⌈F × limit⌉` and the re-arm level `threshold − limit / 20` (at least 0).
pub(crate) fn levels(fraction: f64, limit: u64) -> (u64, u64) {
    let threshold = (fraction * limit as f64).ceil() as u64;
    (threshold, threshold.saturating_sub(limit / 20))
}

/// Once per crossing: the state between two readings of the use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arm {
    armed: bool,
    /// v2 `memory.events` counts already seen.
    high_seen: u64,
    max_seen: u64,
}

impl Arm {
    /// Armed, with the event counts the watcher found when it started (past events fire nothing).
    pub(crate) fn new(high: u64, max: u64) -> Arm {
        Arm {
            armed: true,
            high_seen: high,
            max_seen: max,
        }
    }

    /// Takes a reading (the use; v2's `high` and `max` counts, 0 under v1) and says whether it
    /// fires a dump, and why.
    pub(crate) fn step(
        &mut self,
        usage: u64,
        (threshold, rearm): (u64, u64),
        (high, max): (u64, u64),
    ) -> Option<NearLimitSignal> {
        let new_high = high > self.high_seen;
        let new_max = max > self.max_seen;
        self.high_seen = self.high_seen.max(high);
        self.max_seen = self.max_seen.max(max);
        if !self.armed {
            // Under sustained throttling (new events at every reading) the crossing goes on.
            self.armed = usage < rearm && !new_high && !new_max;
            return None;
        }
        let signal = if usage >= threshold {
            NearLimitSignal::Threshold
        } else if new_max {
            NearLimitSignal::Max
        } else if new_high {
            NearLimitSignal::High
        } else {
            return None;
        };
        self.armed = false;
        Some(signal)
    }
}

/// The watcher thread.
fn watcher() {
    let _guard = Guard::enter();
    let Some(limit) = cgroup::discover(Path::new("/")) else {
        lock(&STATE).watch = NearLimitWatch::NoLimit;
        return;
    };
    let levels = levels(settings::dump_near_limit(), limit.bytes);
    let events = EventsFile::open(&limit);
    let (high, max) = events.as_ref().map_or((0, 0), EventsFile::counts);
    let mut arm = Arm::new(high, max);
    let eventfd = match limit.version {
        Version::V1 => register_thresholds(&limit, levels).ok(),
        Version::V2 => None,
    };
    {
        let mut state = lock(&STATE);
        state.watch = if eventfd.is_some() {
            NearLimitWatch::Eventfd
        } else {
            NearLimitWatch::Poll
        };
        (state.threshold, state.rearm) = levels;
        state.limit = Some(limit.clone());
    }
    loop {
        if let Some(usage) = limit.usage() {
            let counts = events.as_ref().map_or((0, 0), EventsFile::counts);
            if let Some(signal) = arm.step(usage, levels, counts) {
                write_dump(&limit, signal, usage);
            }
        }
        match (&eventfd, &events) {
            (Some(fd), _) => wait_eventfd(fd),
            (None, Some(events)) => events.wait(POLL),
            (None, None) => std::thread::sleep(POLL),
        }
    }
}

/// Registers the threshold and the re-arm level on the limit's cgroup (v1's
/// `cgroup.event_control`: `<eventfd> <fd of memory.usage_in_bytes> <bytes>`), both on one eventfd.
fn register_thresholds(limit: &Limit, (threshold, rearm): (u64, u64)) -> std::io::Result<OwnedFd> {
    use std::io::Write as _;
    // SAFETY: eventfd takes no pointer; a non-negative result is a new descriptor we own.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let eventfd = unsafe { OwnedFd::from_raw_fd(raw) };
    // Kept open for the process's life: the registration refers to it.
    let usage = std::fs::File::open(limit.usage_file())?;
    let mut control = std::fs::OpenOptions::new()
        .write(true)
        .open(limit.dir.join("cgroup.event_control"))?;
    for level in [threshold, rearm] {
        let line = format!("{} {} {level}", eventfd.as_raw_fd(), usage.as_raw_fd());
        control.write_all(line.as_bytes())?;
    }
    std::mem::forget(usage);
    Ok(eventfd)
}

/// Sleeps until the eventfd is signalled (a threshold crossed), clearing it.
fn wait_eventfd(fd: &OwnedFd) {
    let mut count = 0u64;
    // SAFETY: reads 8 bytes into a local u64 from a descriptor we own; blocks until signalled.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
        // A broken eventfd would spin: fall back to the poll's pace.
        std::thread::sleep(POLL);
    }
}

/// v2's `memory.events` of the limit's cgroup, open for `poll`.
struct EventsFile(std::fs::File);

impl EventsFile {
    fn open(limit: &Limit) -> Option<EventsFile> {
        (limit.version == Version::V2)
            .then(|| std::fs::File::open(limit.dir.join("memory.events")).ok())
            .flatten()
            .map(EventsFile)
    }

    /// The `high` and `max` counts now.
    fn counts(&self) -> (u64, u64) {
        let mut buf = [0u8; 512];
        // SAFETY: reads at most `buf.len()` bytes into `buf` from a descriptor we own, at offset
        // 0 (a kernfs file is read whole from the start each time).
        let n = unsafe { libc::pread(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let text = std::str::from_utf8(&buf[..usize::try_from(n).unwrap_or(0)]).unwrap_or("");
        cgroup::events(text)
    }

    /// Waits at most `timeout` for the file to change (the kernel's `POLLPRI` on kernfs files).
    fn wait(&self, timeout: Duration) {
        let mut fds = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack for the call's duration.
        unsafe { libc::poll(&mut fds, 1, timeout.as_millis() as libc::c_int) };
    }
}

/// Writes the near-limit dump (unsymbolized, fsynced) and records it.
fn write_dump(limit: &Limit, signal: NearLimitSignal, usage: u64) {
    if settings::dump_near_limit() <= 0.0 {
        return;
    }
    let started = Instant::now();
    let unix_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let allocated_before = thread_allocated();
    let (mut profile, _) = report::snapshot(false);
    // What the copy of the tables took (the write adds its 64 KiB buffer), for the dump to say.
    let snapshot_bytes = thread_allocated().saturating_sub(allocated_before);
    profile
        .annotations
        .extend(annotations(limit, signal, usage, unix_ms));
    profile.annotations.push((
        "shim_near_limit_snapshot_heap_bytes".into(),
        snapshot_bytes.to_string(),
    ));
    let written = auto_dump::write_profile(Kind::NearLimit, &profile);
    drop(profile);
    let heap_bytes = thread_allocated().saturating_sub(allocated_before);
    match written {
        Ok(path) => {
            let file_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            let dump = NearLimitDump {
                path,
                unix_ms,
                use_bytes: usage,
                signal,
                write_micros: started.elapsed().as_micros() as u64,
                heap_bytes,
                file_bytes,
            };
            let mut state = lock(&STATE);
            state.dumps += 1;
            state.last_dump = Some(dump);
        }
        Err(e) => eprintln!("jeprof-shim: near-limit dump failed: {e}"),
    }
}

/// The dump's `shim_near_limit_*` annotations.
fn annotations(
    limit: &Limit,
    signal: NearLimitSignal,
    usage: u64,
    unix_ms: u64,
) -> Vec<(String, String)> {
    let signal = match signal {
        NearLimitSignal::Threshold => "threshold",
        NearLimitSignal::High => "memory.events high",
        NearLimitSignal::Max => "memory.events max",
    };
    vec![
        ("shim_near_limit_signal".into(), signal.into()),
        (
            "shim_near_limit_limit_bytes".into(),
            limit.bytes.to_string(),
        ),
        ("shim_near_limit_use_bytes".into(), usage.to_string()),
        (
            "shim_near_limit_fraction".into(),
            settings::dump_near_limit().to_string(),
        ),
        ("shim_near_limit_cgroup".into(), limit.cgroup.clone()),
        (
            "shim_near_limit_cgroup_version".into(),
            version_number(limit.version).to_string(),
        ),
        ("shim_near_limit_unix_ms".into(), unix_ms.to_string()),
    ]
}

/// jemalloc's count of the bytes this thread allocated (0 where it cannot be read).
fn thread_allocated() -> u64 {
    tikv_jemalloc_ctl::thread::allocatedp::read().map_or(0, |p| p.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crossing_fires_once_and_rearms_only_below_the_margin() {
        let (threshold, rearm) = levels(0.8, 1000);
        assert_eq!((threshold, rearm), (800, 750));
        let mut arm = Arm::new(0, 0);
        let none = (0, 0);
        let fired: Vec<Option<NearLimitSignal>> = [100, 799, 800, 900, 790, 760, 850, 749, 800]
            .iter()
            .map(|&u| arm.step(u, (threshold, rearm), none))
            .collect();
        use NearLimitSignal::Threshold as T;
        assert_eq!(
            fired,
            [None, None, Some(T), None, None, None, None, None, Some(T)]
        );
    }

    #[test]
    fn v2_events_fire_when_armed_and_only_new_ones() {
        let levels = levels(0.8, 1000);
        // Events counted before the watcher started fire nothing.
        let mut arm = Arm::new(4, 1);
        assert_eq!(arm.step(100, levels, (4, 1)), None);
        assert_eq!(arm.step(100, levels, (5, 1)), Some(NearLimitSignal::High));
        // This crossing has its dump: a max event now fires nothing more, and the use below
        // the re-arm level re-arms only at a reading without a new event.
        assert_eq!(arm.step(10, levels, (5, 2)), None);
        assert_eq!(arm.step(10, levels, (6, 2)), None);
        assert_eq!(arm.step(10, levels, (6, 2)), None);
        assert_eq!(arm.step(10, levels, (5, 3)), Some(NearLimitSignal::Max));
    }

    #[test]
    fn levels_round_the_threshold_up_and_never_go_below_zero() {
        assert_eq!(levels(0.5, 3), (2, 2));
        assert_eq!(levels(0.01, 100), (1, 0));
        let limit = 400u64 << 20;
        assert_eq!(levels(0.8, limit), (335_544_320, 314_572_800));
    }
}
