//! How a profile is described in pprof form ([`crate::pprof`]).

use std::time::{Duration, SystemTime};

/// The sample type a pprof reader shows first ([`PprofOptions::default_sample_type`]). Every
/// profile carries all four, in the order of [`jeprof_dumpfmt::pprof::SAMPLE_TYPES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SampleType {
    /// Estimated objects live now.
    InuseObjects,
    /// Estimated bytes live now (Go's default for `/debug/pprof/heap`).
    #[default]
    InuseSpace,
    /// Estimated objects allocated (since start, or in the window).
    AllocObjects,
    /// Estimated bytes allocated (Go's default for `/debug/pprof/allocs`).
    AllocSpace,
}

impl SampleType {
    /// The name pprof uses (`inuse_space`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SampleType::InuseObjects => "inuse_objects",
            SampleType::InuseSpace => "inuse_space",
            SampleType::AllocObjects => "alloc_objects",
            SampleType::AllocSpace => "alloc_space",
        }
    }
}

/// How [`crate::pprof`] and [`crate::pprof_of`] describe a profile. `PprofOptions::default()` is
/// a point-in-time heap profile taken now, showing `inuse_space` first.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PprofOptions {
    /// The sample type shown first.
    pub default_sample_type: SampleType,
    /// When the profile was taken or its window started (`None`: now).
    pub time: Option<SystemTime>,
    /// The time the profile covers: zero for a point in time, the window's length for a window
    /// (`duration_nanos`).
    pub duration: Duration,
    /// Notes added to the profile's comments (`go tool pprof -comments`), after the profiler's own.
    pub comments: Vec<String>,
}
