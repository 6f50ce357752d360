//! Allocation windows ([`crate::start_allocation_profile`]): the open window and what it saw.

use std::time::{Duration, SystemTime};

use jeprof_dumpfmt::Profile;

/// An open allocation window, from [`crate::start_allocation_profile`]: every sample allocated
/// from now until [`AllocationProfile::stop`] is counted in it. Windows may overlap. Dropping
/// the token without stopping it closes the window and discards its figures.
#[derive(Debug)]
#[must_use = "a window is read by stopping it"]
// The fields the Linux window code reads; elsewhere only `started` is (a window sees nothing).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct AllocationProfile {
    pub(crate) id: u64,
    pub(crate) started: SystemTime,
    pub(crate) dropped_at_start: u64,
    pub(crate) stopped: bool,
}

/// How long the samples of one stack lived, in one window.
///
/// Lifetimes are those of *sampled* objects: the mean weights each freed sample by the number of
/// objects it stands for (so it estimates the mean over all objects of the stack); the minimum
/// and maximum are over the freed samples. Samples still live at the stop are *censored*: their
/// lifetime is at least their age, and only their count and youngest age are given.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct StackLifetimes {
    /// Samples allocated in the window.
    pub samples: u64,
    /// Of those, samples freed in the window.
    pub freed_samples: u64,
    /// Mean lifetime of the freed ones (objects-weighted); `None` when none was freed.
    pub mean: Option<Duration>,
    /// Shortest lifetime of a freed one.
    pub min: Option<Duration>,
    /// Longest lifetime of a freed one.
    pub max: Option<Duration>,
    /// Samples still live at the stop (their lifetimes are censored).
    pub still_live_samples: u64,
    /// Age at the stop of the youngest still-live sample: a lower bound of every still-live
    /// lifetime.
    pub still_live_min_age: Option<Duration>,
}

/// What a stopped window saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WindowProfile {
    /// Per stack: `accum` = estimated objects and bytes allocated in the window, `inuse` = of
    /// those, still live at the stop. No per-thread figures. Annotations: the window's start,
    /// duration, and samples it could not follow (`shim_window_untracked_samples`: allocated in
    /// the window, but the table of tracked samples was full, so their frees are not seen and
    /// they count as live; `shim_window_samples_dropped`: samples dropped process-wide during
    /// the window, as in [`crate::Stats::dropped`]).
    pub profile: Profile,
    /// The lifetimes of each stack's samples, parallel to `profile.stacks`.
    pub lifetimes: Vec<StackLifetimes>,
    /// When the window was started (wall clock).
    pub started: SystemTime,
    /// How long it was open (monotonic clock).
    pub duration: Duration,
    /// Samples allocated in the window whose frees could not be followed (see `profile`).
    pub untracked_samples: u64,
}
