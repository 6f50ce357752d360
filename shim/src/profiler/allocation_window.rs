//! Allocation windows as the public API sees them: [`AllocationProfile`], the token of an open
//! window, and [`WindowProfile`], what its stop returns (the bookkeeping is `parts::allocation_windows`).

use std::time::{Duration, SystemTime};

use jeprof_dumpfmt::{Estimate, Profile, Stack};

use super::report;
use super::sampled_path::dropped;
use crate::base::settings;
use crate::base::sync::lock;
use crate::base::thread::Guard;
use crate::parts::allocation_windows;
use crate::parts::stacks::STACKS;

pub(crate) use crate::api::allocation_window::{AllocationProfile, StackLifetimes, WindowProfile};

impl AllocationProfile {
    /// Opens a window now.
    pub(crate) fn start() -> AllocationProfile {
        let _guard = Guard::enter();
        AllocationProfile {
            id: allocation_windows::open(),
            started: SystemTime::now(),
            dropped_at_start: dropped().total(),
            stopped: false,
        }
    }

    /// Closes the window and returns what it saw.
    pub fn stop(mut self) -> WindowProfile {
        self.stopped = true;
        let _guard = Guard::enter();
        let stopped = allocation_windows::close(self.id);
        let mut profile = Profile::new(settings::sample_rate());
        let mut lifetimes = Vec::new();
        let (duration, untracked) = match &stopped {
            Some(s) => (s.window.started.elapsed(), s.window.untracked),
            None => (Duration::ZERO, 0),
        };
        if let Some(stopped) = stopped {
            let table = lock(&STACKS);
            let records = table.as_ref().map_or(&[][..], |t| &t.records[..]);
            for (&id, figures) in &stopped.window.stacks {
                let Some(record) = records.get(id as usize) else {
                    continue;
                };
                let (still_live, youngest) =
                    stopped.live_ages.get(&id).copied().unwrap_or_default();
                // Exactly zero when every sample was freed (a difference of float sums is not).
                let inuse = if figures.freed_samples >= figures.samples {
                    Estimate::default()
                } else {
                    let mut inuse = figures.allocated;
                    inuse.sub(&figures.freed);
                    clamp_non_negative(inuse)
                };
                let mut stack = Stack {
                    frames: report::frames_for_dump(record.frames),
                    ..Stack::default()
                };
                stack.counts.accum = figures.allocated;
                stack.counts.inuse = inuse;
                profile.stacks.push(stack);
                lifetimes.push(StackLifetimes {
                    samples: figures.samples,
                    freed_samples: figures.freed_samples,
                    mean: (figures.lifetime_weight > 0.0).then(|| {
                        Duration::from_secs_f64(figures.weighted_lifetime / figures.lifetime_weight)
                    }),
                    min: figures.min_lifetime,
                    max: figures.max_lifetime,
                    still_live_samples: still_live,
                    still_live_min_age: (still_live > 0).then_some(youngest),
                });
            }
        }
        let since_epoch = self
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        profile.mapped_libraries = std::fs::read_to_string("/proc/self/maps").ok();
        profile.annotations = vec![
            (
                "shim_window_start_unix_ms".into(),
                since_epoch.as_millis().to_string(),
            ),
            (
                "shim_window_duration_ms".into(),
                duration.as_millis().to_string(),
            ),
            (
                "shim_window_untracked_samples".into(),
                untracked.to_string(),
            ),
            (
                "shim_window_samples_dropped".into(),
                dropped()
                    .total()
                    .saturating_sub(self.dropped_at_start)
                    .to_string(),
            ),
        ];
        // The window's moment is its start, as its pprof form says (`time_nanos`).
        profile.labels = super::pprof::dump_labels(self.started);
        if settings::symbolize() {
            report::add_symbols(&mut profile);
        }
        WindowProfile {
            profile,
            lifetimes,
            started: self.started,
            duration,
            untracked_samples: untracked,
        }
    }
}

impl Drop for AllocationProfile {
    fn drop(&mut self) {
        if !self.stopped {
            let _guard = Guard::enter();
            drop(allocation_windows::close(self.id));
        }
    }
}

/// A difference of sums rounded just below zero is zero (the model refuses negative figures).
fn clamp_non_negative(mut e: Estimate) -> Estimate {
    if e.objects <= 0.0 || e.bytes <= 0.0 {
        return Estimate::default();
    }
    e.objects_variance = e.objects_variance.max(0.0);
    e.bytes_variance = e.bytes_variance.max(0.0);
    e
}
