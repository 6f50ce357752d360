//! The profiler's modules as `lib.rs` calls them, off Linux: each call fails with
//! [`super::unsupported`]'s message or is a documented no-op. The public types are `api`'s; the
//! methods of the handles (scopes, windows) are given here.

pub(crate) mod allocator {
    //! Which allocator holds the heap: nothing to note, nothing reads it here.

    #[inline]
    pub(crate) fn note_inner<A>() {}
}

pub(crate) mod init {
    //! Nothing to initialise.

    pub(crate) fn ensure_init() {}
}

pub(crate) mod settings_table {
    //! The setters: no-ops; the service name is refused.

    use crate::elsewhere::unsupported;

    pub(crate) fn set_sample_rate(_bytes: u64) {}

    pub(crate) fn set_active(_active: bool) {}

    pub(crate) fn reseed(_seed: Option<u64>) {}

    /// Refused: no profile carries a label here (`set_service` is the only caller).
    pub(crate) fn apply_one(_key: &str, _value: &str) -> Result<(), String> {
        Err(unsupported("set_service"))
    }
}

pub(crate) mod sampled_path {
    //! The sampled path, never taken (the countdown never expires).

    use std::alloc::Layout;

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
    //! No history to test.

    use jeprof_dumpfmt::leaks::LeakOptions;

    use crate::api::leak_history::{LeakHistoryError, LeakSuspect};
    use crate::elsewhere::unsupported;

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

    use crate::api::capture::Unwinder;
    use crate::api::otlp_stats::OtlpPushStats;
    use crate::api::report::{ListenerState, Stats};
    use crate::api::sampled_path::Dropped;
    use crate::api::symbolize::SymbolizerCost;
    use crate::elsewhere::unsupported;

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

    /// Every figure 0, `active` false, `unwinder` `FramePointer` (none runs).
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
            http_listener: ListenerState::NotAsked,
            near_limit: Default::default(),
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

    use jeprof_dumpfmt::pprof::PbProfile;
    use jeprof_dumpfmt::Profile;

    use crate::api::pprof::PprofOptions;

    /// `profile` as pprof: the header Linux writes, without process labels and build ids.
    pub(crate) fn encode(profile: &Profile, options: &PprofOptions) -> PbProfile {
        options.encode(profile, Vec::new(), Vec::new(), None)
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

    use crate::api::scopes::{Scope, ScopeGuard, ScopeReporter, ScopeStats, Scoped};
    use crate::elsewhere::unsupported;

    impl Scope {
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
                previous: 0,
                _not_send: PhantomData,
            }
        }
    }

    impl<F: Future> Future for Scoped<F> {
        type Output = F::Output;

        /// The inner future's poll, and nothing else (no scope is made current here).
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            // SAFETY: `inner` is structurally pinned: it is never moved out of `Scoped`, `Scoped`
            // has no `Drop` of its own, and `Scoped<F>` is `Unpin` only when `F` is.
            let inner = unsafe { self.map_unchecked_mut(|s| &mut s.inner) };
            inner.poll(cx)
        }
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

pub(crate) mod allocation_window {
    //! Allocation windows: they open, and stop with an empty profile.

    use std::time::SystemTime;

    use jeprof_dumpfmt::Profile;

    use crate::api::allocation_window::{AllocationProfile, WindowProfile};

    impl AllocationProfile {
        pub(crate) fn start() -> AllocationProfile {
            AllocationProfile {
                id: 0,
                started: SystemTime::now(),
                dropped_at_start: 0,
                stopped: false,
            }
        }

        /// Closes the window: an empty profile over its start and length (wall clock: a window
        /// that sees nothing keeps no monotonic instant).
        pub fn stop(self) -> WindowProfile {
            WindowProfile {
                profile: Profile::new(0),
                lifetimes: Vec::new(),
                started: self.started,
                duration: self.started.elapsed().unwrap_or_default(),
                untracked_samples: 0,
            }
        }
    }
}
