//! The profiler's modules as `lib.rs` calls them, off Linux: each call fails with
//! [`super::unsupported`]'s message or is a documented no-op, and the public types are declared
//! with the fields and methods they have on Linux.

// The pusher's counters: Linux's own module (plain atomics), all zero here.
#[allow(dead_code)]
#[path = "../profiler/otlp_stats.rs"]
pub(crate) mod otlp_stats;

pub(crate) mod allocator {
    //! Which allocator holds the heap: nothing to note, nothing reads it here.

    #[inline]
    pub(crate) fn note_inner<A>() {}
}

pub(crate) mod init {
    //! Nothing to initialise; settings are refused.

    use super::control::ConfigError;
    use crate::elsewhere::unsupported;

    pub(crate) fn ensure_init() {}

    /// Refuses `spec` as a whole: no setting has an effect here.
    pub(crate) fn configure(spec: &str) -> Result<(), ConfigError> {
        Err(ConfigError {
            problems: vec![format!("`{spec}`: {}", unsupported("configure"))],
        })
    }
}

pub(crate) mod control {
    //! The setters (no-ops) and the configuration error.

    use std::fmt;

    use crate::elsewhere::unsupported;

    /// Why a configuration string was (partly) rejected: here, always, with one problem saying
    /// that settings have no effect off Linux.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct ConfigError {
        /// One message per rejected `key:value` pair.
        pub problems: Vec<String>,
    }

    impl fmt::Display for ConfigError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "jeprof-shim: invalid configuration: {}",
                self.problems.join("; ")
            )
        }
    }

    impl std::error::Error for ConfigError {}

    pub(crate) fn set_sample_rate(_bytes: u64) {}

    pub(crate) fn set_active(_active: bool) {}

    pub(crate) fn reseed(_seed: Option<u64>) {}

    /// Refused: no profile carries a label here.
    pub(crate) fn service_name(_value: &str) -> Result<Option<String>, String> {
        Err(unsupported("set_service"))
    }
}

pub(crate) mod sampled_path {
    //! The sampled path, never taken (the countdown never expires), and the drop counts.

    use std::alloc::Layout;

    /// How many samples were dropped, by reason (none here).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct Dropped {
        /// The sampled arena's reserved range was full.
        pub arena_exhausted: u64,
        /// The sampled arena could not be created.
        pub arena_unavailable: u64,
        /// The sample had a new stack and the stack table was full.
        pub stack_table_full: u64,
    }

    impl Dropped {
        /// All drops together.
        pub fn total(&self) -> u64 {
            self.arena_exhausted + self.arena_unavailable + self.stack_table_full
        }
    }

    /// No sampled block: the caller allocates from the inner allocator.
    ///
    /// # Safety
    /// None (the Linux function's contract is accepted and unused).
    pub(crate) unsafe fn alloc_sampled(
        _layout: Layout,
        _zeroed: bool,
        _period: u64,
        _marker: usize,
    ) -> Option<*mut u8> {
        None
    }

    /// Never called: no pointer is in the (empty) sampled range.
    ///
    /// # Safety
    /// None (no block is ever sampled here).
    pub(crate) unsafe fn free_sampled(_ptr: *mut u8, _layout: Layout) {}
}

pub(crate) mod leak_history {
    //! The leak test's types; there is no history to test.

    use std::fmt;
    use std::time::{Duration, SystemTime};

    use jeprof_dumpfmt::leaks::LeakOptions;

    use crate::elsewhere::unsupported;

    /// A stack whose live bytes are still growing ([`crate::leak_suspects`]; never here).
    #[derive(Debug, Clone, PartialEq)]
    #[non_exhaustive]
    pub struct LeakSuspect {
        /// The user frame.
        pub function: String,
        /// The stack's functions, leaf first.
        pub stack: Vec<String>,
        /// Growth over the test's window, in bytes per second.
        pub rate: f64,
        /// The rate's 95% interval.
        pub rate_95: (f64, f64),
        /// Live bytes at the last snapshot.
        pub live_bytes: f64,
        /// Their 95% interval.
        pub live_bytes_95: (f64, f64),
        /// When the current rise began.
        pub started: SystemTime,
        /// The test's p-value.
        pub p_value: f64,
    }

    /// Why [`crate::leak_suspects`] has no answer: here always
    /// [`LeakHistoryError::Unsupported`].
    #[derive(Debug, Clone, PartialEq)]
    #[non_exhaustive]
    pub enum LeakHistoryError {
        /// `leak_interval` is 0 and no snapshot was recorded.
        Off,
        /// The history is still too short for the test.
        TooShort {
            /// Snapshots held.
            snapshots: usize,
            /// Snapshots the test needs.
            needed: usize,
            /// About when there will be enough, from now.
            ready_in: Duration,
        },
        /// `leak_history` holds fewer snapshots than the test needs with these options.
        TooSmall {
            /// The `leak_history` setting.
            leak_history: usize,
            /// Snapshots the test needs.
            needed: usize,
        },
        /// The options are out of range.
        Options(String),
        /// The profiler does not run on this system (the message says which and why).
        Unsupported(String),
    }

    impl fmt::Display for LeakHistoryError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                LeakHistoryError::Off => write!(f, "the leak history is off (leak_interval:0)"),
                LeakHistoryError::TooShort {
                    snapshots, needed, ..
                } => write!(
                    f,
                    "the leak history holds {snapshots} snapshots; the test needs {needed}"
                ),
                LeakHistoryError::TooSmall {
                    leak_history,
                    needed,
                } => write!(
                    f,
                    "leak_history:{leak_history} keeps fewer snapshots than the test needs \
                     ({needed})"
                ),
                LeakHistoryError::Options(why) => write!(f, "leak options: {why}"),
                LeakHistoryError::Unsupported(why) => write!(f, "{why}"),
            }
        }
    }

    impl std::error::Error for LeakHistoryError {}

    /// What the test found (never built here).
    pub(crate) struct Found {
        pub(crate) suspects: Vec<(LeakSuspect, ())>,
    }

    pub(crate) fn ensure_recorder() {}

    pub(crate) fn find(_options: &LeakOptions) -> Result<Found, LeakHistoryError> {
        Err(LeakHistoryError::Unsupported(unsupported("leak_suspects")))
    }
}

pub(crate) mod report {
    //! Snapshots (empty), figures (zero) and dumps (refused).

    use std::io::Write;
    use std::path::Path;

    use jeprof_dumpfmt::Profile;

    use super::otlp_stats::OtlpPushStats;
    use super::sampled_path::Dropped;
    use crate::elsewhere::parts::capture::Unwinder;
    use crate::elsewhere::parts::symbolize::SymbolizerCost;
    use crate::elsewhere::unsupported;

    /// A snapshot of the profiler's own state: here every figure is 0, `active` is false and
    /// `unwinder` is `FramePointer` (none runs).
    #[derive(Debug, Clone, Copy, PartialEq)]
    #[non_exhaustive]
    pub struct Stats {
        /// Sampled objects currently live.
        pub live_samples: u64,
        /// Distinct stacks recorded since start.
        pub distinct_stacks: u64,
        /// Bytes held by the profiler's tables.
        pub metadata_bytes: u64,
        /// Samples recorded since start.
        pub samples_taken: u64,
        /// Per-thread tables held.
        pub thread_tables: u64,
        /// Samples dropped since start, by reason.
        pub dropped: Dropped,
        /// The configured mean sampling period R in bytes.
        pub sample_rate: u64,
        /// Whether sampling is active.
        pub active: bool,
        /// The unwinder in use.
        pub unwinder: Unwinder,
        /// Bytes of the sampled arena's range handed to jemalloc.
        pub arena_bytes_used: u64,
        /// Size of the sampled arena's reserved range.
        pub arena_bytes_reserved: u64,
        /// Cost of the last in-process symbolization, if one ran.
        pub last_symbolization: Option<SymbolizerCost>,
        /// Estimated bytes allocated since start.
        pub allocated_bytes_estimate: u64,
        /// Estimated live bytes.
        pub live_bytes_estimate: u64,
        /// Estimated live bytes of the peak tracker's snapshot.
        pub peak_bytes_estimate: u64,
        /// Snapshots the peak tracker took since start.
        pub peak_snapshots: u64,
        /// Bytes the peak tracker's snapshot holds.
        pub peak_tracker_bytes: u64,
        /// Bytes the leak history holds.
        pub leak_history_bytes: u64,
        /// Snapshots the leak history recorded since start.
        pub leak_snapshots: u64,
        /// What `otlp_push` has done.
        pub otlp: OtlpPushStats,
    }

    /// An empty profile (period 0: nothing is sampled).
    pub(crate) fn snapshot(_symbolize_now: bool) -> (Profile, Option<SymbolizerCost>) {
        (Profile::new(0), None)
    }

    pub(crate) fn dump_to(_out: &mut dyn Write) -> Result<(), jeprof_dumpfmt::Error> {
        Err(jeprof_dumpfmt::Error::Unsupported(unsupported("dump_to")))
    }

    pub(crate) fn dump(_path: &Path) -> Result<(), jeprof_dumpfmt::Error> {
        Err(jeprof_dumpfmt::Error::Unsupported(unsupported("dump")))
    }

    pub(crate) fn stats() -> Stats {
        Stats {
            live_samples: 0,
            distinct_stacks: 0,
            metadata_bytes: 0,
            samples_taken: 0,
            thread_tables: 0,
            dropped: Dropped::default(),
            sample_rate: 0,
            active: false,
            unwinder: Unwinder::FramePointer,
            arena_bytes_used: 0,
            arena_bytes_reserved: 0,
            last_symbolization: None,
            allocated_bytes_estimate: 0,
            live_bytes_estimate: 0,
            peak_bytes_estimate: 0,
            peak_snapshots: 0,
            peak_tracker_bytes: 0,
            leak_history_bytes: 0,
            leak_snapshots: 0,
            otlp: OtlpPushStats::default(),
        }
    }
}

pub(crate) mod auto_dump {
    //! Sequenced dumps: refused; the peak is an empty profile.

    use std::path::PathBuf;

    use jeprof_dumpfmt::Profile;

    use crate::elsewhere::unsupported;

    /// What a sequenced dump holds (only `dump_next`'s kind is asked for here).
    pub(crate) enum Kind {
        Manual,
    }

    pub(crate) fn ensure_writer() {}

    pub(crate) fn write_sequenced(_kind: Kind) -> Result<PathBuf, jeprof_dumpfmt::Error> {
        Err(jeprof_dumpfmt::Error::Unsupported(unsupported("dump_next")))
    }

    pub(crate) fn peak_profile(_symbolize_now: bool) -> Profile {
        Profile::new(0)
    }
}

pub(crate) mod pprof {
    //! Profiles in pprof form: the conversion works on any profile (a dump read from a file, for
    //! one), without the labels that name the process on Linux.

    use std::time::{Duration, SystemTime};

    use jeprof_dumpfmt::pprof::{self as pb, PbProfile};
    use jeprof_dumpfmt::Profile;

    /// The sample type a pprof reader shows first.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum SampleType {
        /// Estimated objects live now.
        InuseObjects,
        /// Estimated bytes live now.
        #[default]
        InuseSpace,
        /// Estimated objects allocated.
        AllocObjects,
        /// Estimated bytes allocated.
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

    /// How [`crate::pprof`] and [`crate::pprof_of`] describe a profile.
    #[derive(Debug, Clone, Default, PartialEq)]
    #[non_exhaustive]
    pub struct PprofOptions {
        /// The sample type shown first.
        pub default_sample_type: SampleType,
        /// When the profile was taken or its window started (`None`: now).
        pub time: Option<SystemTime>,
        /// The time the profile covers.
        pub duration: Duration,
        /// Notes added to the profile's comments, after the profiler's own.
        pub comments: Vec<String>,
    }

    /// `profile` as pprof: the header Linux writes, without process labels and build ids.
    pub(crate) fn encode(profile: &Profile, options: &PprofOptions) -> PbProfile {
        let time = options.time.unwrap_or_else(SystemTime::now);
        let time_nanos = time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let mut comments: Vec<String> = vec![format!(
            "jeprof-shim heap profile: unbiased estimates, sample period R = {} bytes",
            profile.sample_period
        )];
        comments.extend(profile.annotations.iter().map(|(k, v)| format!("{k}: {v}")));
        comments.extend(options.comments.iter().cloned());
        let header = pb::Header {
            period: profile.sample_period,
            time_nanos,
            duration_nanos: i64::try_from(options.duration.as_nanos()).unwrap_or(i64::MAX),
            default_sample_type: options.default_sample_type.name().to_string(),
            comments,
            labels: Vec::new(),
        };
        pb::from_profile(
            profile,
            &pb::Options {
                header,
                ..pb::Options::default()
            },
        )
    }
}

pub(crate) mod scopes {
    //! Scopes: every scope is [`Scope::NONE`], entering one changes nothing, there are no
    //! figures; the periodic report and scope dumps are refused.

    use std::future::Future;
    use std::marker::PhantomData;
    use std::path::Path;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use jeprof_dumpfmt::Estimate;

    use crate::elsewhere::unsupported;

    /// A scope label. Here no label is interned: every scope is [`Scope::NONE`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Scope(u16);

    impl Scope {
        /// No scope: what threads start in.
        pub const NONE: Scope = Scope(0);

        /// [`Scope::NONE`] (no label is interned here).
        pub fn new(_label: &str) -> Scope {
            Scope::NONE
        }

        /// `None` (no label is interned here).
        pub fn label(self) -> Option<&'static str> {
            None
        }

        /// A guard that changes nothing (no scope is tracked here).
        pub fn enter(self) -> ScopeGuard {
            ScopeGuard {
                _not_send: PhantomData,
            }
        }
    }

    impl From<&str> for Scope {
        fn from(label: &str) -> Scope {
            Scope::new(label)
        }
    }

    /// The current scope on this thread until dropped ([`Scope::enter`]). Not `Send`, as on Linux.
    #[must_use = "the scope ends when the guard drops"]
    #[derive(Debug)]
    pub struct ScopeGuard {
        _not_send: PhantomData<*const ()>,
    }

    /// A future polled in a scope ([`crate::scope`]): here it polls the future and nothing else.
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct Scoped<F> {
        inner: F,
    }

    impl<F> Scoped<F> {
        pub(crate) fn new(_scope: Scope, inner: F) -> Scoped<F> {
            Scoped { inner }
        }
    }

    impl<F: Future> Future for Scoped<F> {
        type Output = F::Output;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            // SAFETY: `inner` is structurally pinned: it is never moved out of `Scoped`, `Scoped`
            // has no `Drop` of its own, and `Scoped<F>` is `Unpin` only when `F` is.
            let inner = unsafe { self.map_unchecked_mut(|s| &mut s.inner) };
            inner.poll(cx)
        }
    }

    /// One scope's figures ([`crate::scopes`]; none here).
    #[derive(Debug, Clone, PartialEq)]
    #[non_exhaustive]
    pub struct ScopeStats {
        /// The scope's label.
        pub label: &'static str,
        /// Estimated live objects and bytes allocated in the scope, with variances.
        pub live: Estimate,
        /// 95% interval of the live bytes.
        pub live_bytes_interval: (f64, f64),
        /// 95% interval of the live objects.
        pub live_objects_interval: (f64, f64),
        /// Estimated objects and bytes allocated in the scope since start.
        pub allocated: Estimate,
        /// Live samples behind `live`.
        pub live_samples: u64,
    }

    /// Stops the periodic report when dropped ([`crate::scope_report`]; never started here).
    #[derive(Debug)]
    pub struct ScopeReporter {
        _never: std::convert::Infallible,
    }

    pub(crate) fn all_scopes() -> Vec<ScopeStats> {
        Vec::new()
    }

    pub(crate) fn scope_profile(
        _label: &str,
        _symbolize_now: bool,
    ) -> Option<jeprof_dumpfmt::Profile> {
        None
    }

    pub(crate) fn dump_scope(_label: &str, _path: &Path) -> Result<(), jeprof_dumpfmt::Error> {
        Err(jeprof_dumpfmt::Error::Unsupported(unsupported(
            "dump_scope",
        )))
    }

    pub(crate) fn scope_report(
        _interval: Duration,
        _f: impl FnMut(&[ScopeStats]) + Send + 'static,
    ) -> std::io::Result<ScopeReporter> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            unsupported("scope_report"),
        ))
    }
}

pub(crate) mod window {
    //! Allocation windows: they open, and stop with an empty profile.

    use std::time::{Duration, Instant, SystemTime};

    use jeprof_dumpfmt::Profile;

    /// An open allocation window ([`crate::start_allocation_profile`]); here it sees nothing.
    #[derive(Debug)]
    #[must_use = "a window is read by stopping it"]
    pub struct AllocationProfile {
        started: SystemTime,
        opened: Instant,
    }

    /// How long the samples of one stack lived, in one window.
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    #[non_exhaustive]
    pub struct StackLifetimes {
        /// Samples allocated in the window.
        pub samples: u64,
        /// Of those, samples freed in the window.
        pub freed_samples: u64,
        /// Mean lifetime of the freed ones.
        pub mean: Option<Duration>,
        /// Shortest lifetime of a freed one.
        pub min: Option<Duration>,
        /// Longest lifetime of a freed one.
        pub max: Option<Duration>,
        /// Samples still live at the stop.
        pub still_live_samples: u64,
        /// Age at the stop of the youngest still-live sample.
        pub still_live_min_age: Option<Duration>,
    }

    /// What a stopped window saw: here an empty profile, with the window's start and length.
    #[derive(Debug, Clone, PartialEq)]
    #[non_exhaustive]
    pub struct WindowProfile {
        /// Per stack, what was allocated in the window and is still live (empty here).
        pub profile: Profile,
        /// The lifetimes of each stack's samples, parallel to `profile.stacks`.
        pub lifetimes: Vec<StackLifetimes>,
        /// When the window was started (wall clock).
        pub started: SystemTime,
        /// How long it was open (monotonic clock).
        pub duration: Duration,
        /// Samples allocated in the window whose frees could not be followed.
        pub untracked_samples: u64,
    }

    impl AllocationProfile {
        pub(crate) fn start() -> AllocationProfile {
            AllocationProfile {
                started: SystemTime::now(),
                opened: Instant::now(),
            }
        }

        /// Closes the window: an empty profile over its start and length.
        pub fn stop(self) -> WindowProfile {
            WindowProfile {
                profile: Profile::new(0),
                lifetimes: Vec::new(),
                started: self.started,
                duration: self.opened.elapsed(),
                untracked_samples: 0,
            }
        }
    }
}
