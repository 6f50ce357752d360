//! Allocation windows: what was sampled between a window's start and its stop, how much of it was
//! freed in the window, and how long the freed samples lived.
//!
//! One table serves every open window. A sample allocated while at least one window is open gets
//! a serial number and is *tracked* (address → stack, estimate, birth time, serial); a window
//! covers the samples whose serial is at least the serial current when it opened, so overlapping
//! windows share the tracked samples instead of each keeping a log. Each window sums, per stack,
//! what it saw allocated and freed, so its memory is bounded by the number of stacks, and the
//! tracked table by [`MAX_TRACKED`] (a sample beyond that is counted as allocated but its free
//! is not seen: the window counts it as *untracked* and reports the number).
//!
//! With no window open, the sampled path reads [`OPEN`] (one relaxed load) and does nothing else.
//! The table sits behind a `std::sync::Mutex` (futex-based: it never allocates) and allocates
//! only inside the re-entrancy guard, like the other tables.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jeprof_dumpfmt::Estimate;

use crate::base::hash::Map;
use crate::base::sync::lock;

/// Most samples tracked at once over all windows (allocated while one was open and not freed
/// since): 128 Ki, about 19 MiB of table at the cap (2^18 buckets of 73 bytes), and 64 GiB of
/// allocation at the default R.
pub(crate) const MAX_TRACKED: usize = 1 << 17;

/// Number of open windows: the sampled path's one load when none is open.
static OPEN: AtomicU32 = AtomicU32::new(0);

/// The windows' table.
pub(crate) static WINDOWS: Mutex<Windows> = Mutex::new(Windows::new());

/// Whether a window may be open (the sampled path's check).
#[inline]
pub(crate) fn any_open() -> bool {
    // Ordering: a hint read on its own; the table itself is read under its lock. A sample that
    // races a window's start or stop may or may not be counted in it.
    OPEN.load(Ordering::Relaxed) != 0
}

/// A sample allocated while some window was open.
#[derive(Clone, Copy)]
struct Tracked {
    stack: u32,
    estimate: Estimate,
    born: Instant,
    serial: u64,
}

/// One stack's figures in one window.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WindowStack {
    /// Allocated in the window (estimate).
    pub(crate) allocated: Estimate,
    /// Allocated in the window and freed in it (estimate).
    pub(crate) freed: Estimate,
    /// Samples allocated in the window.
    pub(crate) samples: u64,
    /// Of those, samples freed in it.
    pub(crate) freed_samples: u64,
    /// Σ objects weight × lifetime (seconds) over the freed samples.
    pub(crate) weighted_lifetime: f64,
    /// Σ objects weight over the freed samples.
    pub(crate) lifetime_weight: f64,
    /// Shortest and longest lifetime of a freed sample.
    pub(crate) min_lifetime: Option<Duration>,
    pub(crate) max_lifetime: Option<Duration>,
}

/// An open window.
pub(crate) struct Window {
    id: u64,
    /// The first serial this window covers.
    first_serial: u64,
    pub(crate) started: Instant,
    /// Per stack id.
    pub(crate) stacks: Map<u32, WindowStack>,
    /// Samples allocated in the window that the full tracked table could not hold (their frees
    /// are not seen).
    pub(crate) untracked: u64,
}

/// A stopped window: its figures, and the ages of its samples still live at the stop.
pub(crate) struct Stopped {
    pub(crate) window: Window,
    /// Per stack id: still-live samples' count and their youngest age (a lower bound of their
    /// lifetimes, which are censored at the stop).
    pub(crate) live_ages: Map<u32, (u64, Duration)>,
}

/// Every open window and the samples they track.
pub(crate) struct Windows {
    next_id: u64,
    next_serial: u64,
    open: Vec<Window>,
    tracked: Option<Map<usize, Tracked>>,
}

impl Windows {
    const fn new() -> Windows {
        Windows {
            next_id: 0,
            next_serial: 0,
            open: Vec::new(),
            tracked: None,
        }
    }

    /// Opens a window; returns its id.
    fn open(&mut self, now: Instant) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.open.push(Window {
            id,
            first_serial: self.next_serial,
            started: now,
            stacks: Map::default(),
            untracked: 0,
        });
        id
    }

    /// Records a sample at `addr` allocated now.
    fn on_alloc(&mut self, addr: usize, stack: u32, estimate: &Estimate, now: Instant) {
        if self.open.is_empty() {
            return;
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        let tracked = self.tracked.get_or_insert_with(Map::default);
        let fits = tracked.len() < MAX_TRACKED;
        if fits {
            tracked.insert(
                addr,
                Tracked {
                    stack,
                    estimate: *estimate,
                    born: now,
                    serial,
                },
            );
        }
        for w in &mut self.open {
            let s = w.stacks.entry(stack).or_default();
            s.allocated.add(estimate);
            s.samples += 1;
            if !fits {
                w.untracked += 1;
            }
        }
    }

    /// Records the free of the sample at `addr` now (nothing if it is not tracked).
    fn on_free(&mut self, addr: usize, now: Instant) {
        let Some(t) = self.tracked.as_mut().and_then(|m| m.remove(&addr)) else {
            return;
        };
        let lifetime = now.saturating_duration_since(t.born);
        for w in self.open.iter_mut().filter(|w| t.serial >= w.first_serial) {
            let s = w.stacks.entry(t.stack).or_default();
            s.freed.add(&t.estimate);
            s.freed_samples += 1;
            s.weighted_lifetime += t.estimate.objects * lifetime.as_secs_f64();
            s.lifetime_weight += t.estimate.objects;
            s.min_lifetime = Some(s.min_lifetime.map_or(lifetime, |m| m.min(lifetime)));
            s.max_lifetime = Some(s.max_lifetime.map_or(lifetime, |m| m.max(lifetime)));
        }
    }

    /// Closes window `id` (if open) and returns it with its still-live samples' ages; forgets
    /// the tracked samples no open window covers any more.
    fn close(&mut self, id: u64, now: Instant) -> Option<Stopped> {
        let index = self.open.iter().position(|w| w.id == id)?;
        let window = self.open.remove(index);
        let mut live_ages: Map<u32, (u64, Duration)> = Map::default();
        let oldest_open = self.open.iter().map(|w| w.first_serial).min();
        if let Some(tracked) = self.tracked.as_mut() {
            for t in tracked.values().filter(|t| t.serial >= window.first_serial) {
                let age = now.saturating_duration_since(t.born);
                let entry = live_ages.entry(t.stack).or_insert((0, age));
                entry.0 += 1;
                entry.1 = entry.1.min(age);
            }
            match oldest_open {
                Some(first) => tracked.retain(|_, t| t.serial >= first),
                // Nothing open: give the table's memory back.
                None => self.tracked = None,
            }
        }
        Some(Stopped { window, live_ages })
    }

    /// Heap bytes held (capacity).
    fn heap_bytes(&self) -> usize {
        let tracked = self.tracked.as_ref().map_or(0, |m| {
            m.capacity() * (std::mem::size_of::<(usize, Tracked)>() + 1)
        });
        let windows: usize = self
            .open
            .iter()
            .map(|w| w.stacks.capacity() * (std::mem::size_of::<(u32, WindowStack)>() + 1))
            .sum();
        tracked + windows + self.open.capacity() * std::mem::size_of::<Window>()
    }
}

/// Opens a window now; returns its id.
pub(crate) fn open() -> u64 {
    let mut windows = lock(&WINDOWS);
    let id = windows.open(Instant::now());
    // Ordering: see `any_open`.
    OPEN.fetch_add(1, Ordering::Relaxed);
    id
}

/// Closes window `id`; `None` if it was not open.
pub(crate) fn close(id: u64) -> Option<Stopped> {
    let mut windows = lock(&WINDOWS);
    let stopped = windows.close(id, Instant::now())?;
    // Ordering: see `any_open`.
    OPEN.fetch_sub(1, Ordering::Relaxed);
    Some(stopped)
}

/// The sampled path, after it recorded a sample at `addr` (call only when [`any_open`]).
pub(crate) fn on_alloc(addr: usize, stack: u32, estimate: &Estimate) {
    let now = Instant::now();
    lock(&WINDOWS).on_alloc(addr, stack, estimate, now);
}

/// The free of the sample at `addr` (call only when [`any_open`]).
pub(crate) fn on_free(addr: usize) {
    let now = Instant::now();
    lock(&WINDOWS).on_free(addr, now);
}

/// Heap bytes the windows' table holds.
pub(crate) fn heap_bytes() -> usize {
    lock(&WINDOWS).heap_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(bytes: f64) -> Estimate {
        Estimate {
            objects: 1.0,
            bytes,
            objects_variance: 0.0,
            bytes_variance: 0.0,
        }
    }

    #[test]
    fn overlapping_windows_each_see_only_what_was_allocated_after_they_opened() {
        let mut w = Windows::new();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let first = w.open(at(0));
        w.on_alloc(0x100, 1, &est(10.0), at(1));
        let second = w.open(at(2));
        w.on_alloc(0x200, 1, &est(20.0), at(3));
        w.on_alloc(0x300, 2, &est(40.0), at(4));
        // Freed: one before the second window, one in both; 0x999 was never tracked.
        w.on_free(0x100, at(5));
        w.on_free(0x200, at(8));
        w.on_free(0x999, at(9));

        let a = w.close(first, at(10)).unwrap();
        let s1 = a.window.stacks[&1];
        assert_eq!((s1.samples, s1.freed_samples), (2, 2));
        assert_eq!(s1.allocated.bytes, 30.0);
        assert_eq!(s1.freed.bytes, 30.0);
        assert_eq!(s1.min_lifetime, Some(Duration::from_millis(4)));
        assert_eq!(s1.max_lifetime, Some(Duration::from_millis(5)));
        assert!((s1.weighted_lifetime / s1.lifetime_weight - 0.0045).abs() < 1e-9);
        assert_eq!(a.live_ages[&2], (1, Duration::from_millis(6)));

        let b = w.close(second, at(12)).unwrap();
        let s1 = b.window.stacks[&1];
        assert_eq!((s1.samples, s1.freed_samples), (1, 1));
        assert_eq!(s1.allocated.bytes, 20.0);
        assert_eq!(b.window.stacks[&2].freed_samples, 0);
        assert_eq!(b.live_ages[&2], (1, Duration::from_millis(8)));
        assert!(
            w.tracked.is_none(),
            "no window open: the table is given back"
        );
        assert!(w.close(first, at(13)).is_none(), "closed twice");
    }

    #[test]
    fn samples_beyond_the_tracked_cap_count_as_allocated_and_untracked() {
        let mut w = Windows::new();
        let t0 = Instant::now();
        let id = w.open(t0);
        let extra = 3;
        for i in 0..MAX_TRACKED + extra {
            w.on_alloc(16 * (i + 1), 1, &est(1.0), t0);
        }
        // Every sample is freed; the untracked ones' frees are not seen.
        for i in 0..MAX_TRACKED + extra {
            w.on_free(16 * (i + 1), t0);
        }
        let stopped = w.close(id, t0).unwrap();
        let s = stopped.window.stacks[&1];
        assert_eq!(s.samples, (MAX_TRACKED + extra) as u64);
        assert_eq!(s.freed_samples, MAX_TRACKED as u64);
        assert_eq!(stopped.window.untracked, extra as u64);
    }

    #[test]
    fn a_sample_allocated_with_no_window_open_is_not_tracked() {
        let mut w = Windows::new();
        let t0 = Instant::now();
        w.on_alloc(0x100, 1, &est(10.0), t0);
        let id = w.open(t0);
        w.on_free(0x100, t0);
        let stopped = w.close(id, t0).unwrap();
        assert!(stopped.window.stacks.is_empty());
    }
}
