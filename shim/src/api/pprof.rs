//! How a profile is described in pprof form ([`crate::pprof`]).

use std::time::{Duration, SystemTime};

use jeprof_dumpfmt::pprof::{self as pb, PbProfile};
use jeprof_dumpfmt::Profile;

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

impl PprofOptions {
    /// `profile` as pprof, described by these options, with `labels` (the process's, on Linux)
    /// and `build_ids` (`(path, id)` of the loaded objects) in the header, the program's own
    /// mapping first and shown as `program_file` when given (the path it was started by); the profile's
    /// annotations (the profiler's own figures, drops) become comments after the line that says
    /// what the figures are, and the options' comments after those.
    pub(crate) fn encode(
        &self,
        profile: &Profile,
        labels: Vec<(String, String)>,
        build_ids: Vec<(String, String)>,
        program_file: Option<String>,
    ) -> PbProfile {
        let header = self.header(profile, labels);
        pb::from_profile(
            profile,
            &pb::Options {
                header,
                build_ids,
                program_file,
                ..pb::Options::default()
            },
        )
    }

    /// [`PprofOptions::encode`] for the residency profile ([`pb::rss::from_profile_rss`]):
    /// the same header, `resident_space` shown first (`default_sample_type` names a heap
    /// profile's types, not these).
    #[cfg(feature = "http")]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn encode_rss(
        &self,
        profile: &Profile,
        rss: &jeprof_dumpfmt::rss::RssFigures,
        labels: Vec<(String, String)>,
        build_ids: Vec<(String, String)>,
        program_file: Option<String>,
    ) -> PbProfile {
        let mut header = self.header(profile, labels);
        header.default_sample_type = pb::rss::RSS_DEFAULT_SAMPLE_TYPE.to_string();
        pb::rss::from_profile_rss(
            profile,
            rss,
            &pb::Options {
                header,
                build_ids,
                program_file,
                ..pb::Options::default()
            },
        )
    }

    /// The header of `profile` described by these options, with `labels`.
    fn header(&self, profile: &Profile, labels: Vec<(String, String)>) -> pb::Header {
        let time = self.time.unwrap_or_else(SystemTime::now);
        let time_nanos = time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let mut comments: Vec<String> = vec![format!(
            "jeprof-shim heap profile: unbiased estimates, sample period R = {} bytes",
            profile.sample_period
        )];
        // The residency's per-stack and per-class lines would be a comment per stack: the pprof
        // keeps its totals only (the heap_v2 dump carries them all).
        let per_stack = [jeprof_dumpfmt::rss::SITE, jeprof_dumpfmt::rss::SLAB_CLASS];
        comments.extend(
            profile
                .annotations
                .iter()
                .filter(|(k, _)| !per_stack.contains(&k.as_str()))
                .map(|(k, v)| format!("{k}: {v}")),
        );
        comments.extend(self.comments.iter().cloned());
        pb::Header {
            period: profile.sample_period,
            time_nanos,
            duration_nanos: i64::try_from(self.duration.as_nanos()).unwrap_or(i64::MAX),
            default_sample_type: self.default_sample_type.name().to_string(),
            comments,
            labels,
        }
    }
}
