#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::io::Write;
use std::path::Path;

// The profiler runs on Linux. Elsewhere the same functions come from `elsewhere` (a pass-through
// allocator; every profiling call refuses or is a no-op), so the code below, and every public
// signature, is one for all targets; the public types are `api`'s on both. `c_api` is jemalloc's
// malloc family: Linux only.
mod api;
#[cfg(target_os = "linux")]
mod base;
#[cfg(target_os = "linux")]
pub mod c_api;
#[cfg(not(target_os = "linux"))]
mod elsewhere;
#[cfg(target_os = "linux")]
mod exact;
#[cfg(all(target_os = "linux", feature = "http"))]
pub mod http;
#[cfg(target_os = "linux")]
mod parts;
#[cfg(target_os = "linux")]
mod profiler;
#[cfg(target_os = "linux")]
mod startup;
#[cfg(all(not(target_os = "linux"), feature = "http"))]
pub use elsewhere::http;
#[cfg(not(target_os = "linux"))]
use elsewhere::{base, exact, parts, profiler, startup};

pub use api::allocation_window::{AllocationProfile, StackLifetimes, WindowProfile};
pub use api::capture::{Unwinder, MAX_FRAMES_LIMIT};
pub use api::control::ConfigError;
pub use api::exact::{ExactScopeStats, ExactScopes};
pub use api::leak_history::{LeakHistoryError, LeakSuspect};
pub use api::near_limit::{NearLimitDump, NearLimitSignal, NearLimitStats, NearLimitWatch};
pub use api::otlp_stats::OtlpPushStats;
pub use api::pprof::{PprofOptions, SampleType};
pub use api::report::{ListenerState, Stats};
pub use api::sampled_path::Dropped;
pub use api::scopes::{Scope, ScopeGuard, ScopeReporter, ScopeStats, Scoped};
pub use api::symbolize::SymbolizerCost;
pub use base::settings::{
    DEFAULT_ARENA_SIZE, DEFAULT_LEAK_HISTORY, DEFAULT_LEAK_INTERVAL, DEFAULT_MAX_FRAMES,
    DEFAULT_MAX_STACKS, DEFAULT_OTLP_INTERVAL, DEFAULT_SAMPLE_RATE, LEAK_HISTORY_STACKS,
};
#[cfg(feature = "http")]
pub use http::serve;
pub use jeprof_dumpfmt;
pub use jeprof_dumpfmt::leaks::LeakOptions;

use parts::{sampled_arena, sampler};
use profiler::{allocator, auto_dump, init, leak_history, report, sampled_path, settings_table};

/// A [`GlobalAlloc`] that samples allocations into a heap profile and serves everything else from
/// `A`. See the crate docs.
#[derive(Debug)]
pub struct Profiled<A> {
    inner: A,
    /// The sampled range as this value knows it; what `dealloc` compares pointers with.
    range: sampled_arena::RangeCopy,
}

impl<A> Profiled<A> {
    /// Wraps `inner`. `const`, so it can initialise a `#[global_allocator]` static.
    pub const fn new(inner: A) -> Profiled<A> {
        Profiled {
            inner,
            range: sampled_arena::RangeCopy::new(),
        }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: Default> Default for Profiled<A> {
    fn default() -> Profiled<A> {
        Profiled::new(A::default())
    }
}

/// The address of a local of the calling frame: the unwinders skip every frame up to and
/// including the one that holds it.
macro_rules! frame_marker {
    () => {{
        let marker = 0u8;
        std::hint::black_box(&marker) as *const u8 as usize
    }};
}

impl<A: GlobalAlloc> Profiled<A> {
    /// [`sampled_path::alloc_sampled`], then the range copy filled before the block leaves this
    /// value: the one way a sampled block is handed out, so `dealloc` always recognises it.
    ///
    /// # Safety
    /// As for [`sampled_path::alloc_sampled`].
    #[inline(always)]
    unsafe fn alloc_sampled(
        &self,
        layout: Layout,
        zeroed: bool,
        period: u64,
        marker: usize,
    ) -> Option<*mut u8> {
        // SAFETY: forwarded contract.
        let ptr = unsafe { sampled_path::alloc_sampled(layout, zeroed, period, marker) }?;
        self.range.fill();
        Some(ptr)
    }

    /// The allocation path once the countdown expired. `layout` comes first and `this` after it
    /// so that the fast path reaches here with the size still in the register it arrived in (no
    /// moves before the sampling branch).
    ///
    /// # Safety
    /// The `GlobalAlloc::alloc` contract: `layout` has a non-zero size.
    #[cold]
    #[inline(never)]
    unsafe fn alloc_slow(layout: Layout, this: &Self, zeroed: bool) -> *mut u8 {
        let marker = frame_marker!();
        allocator::note_inner::<A>();
        if let Some(period) = sampler::on_countdown_expired(layout.size(), init::ensure_init) {
            // SAFETY: layout has a non-zero size (our caller's contract); marker is a local.
            if let Some(ptr) = unsafe { this.alloc_sampled(layout, zeroed, period, marker) } {
                return ptr;
            }
        }
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe {
            if zeroed {
                this.inner.alloc_zeroed(layout)
            } else {
                this.inner.alloc(layout)
            }
        }
    }

    /// The reallocation path once the countdown expired or `ptr` was sampled. The arguments come
    /// in the order `realloc` received them and `this` after them, as in `alloc_slow`: the fast
    /// path reaches here without moving a register.
    ///
    /// # Safety
    /// The `GlobalAlloc::realloc` contract for `ptr`, `layout` and `new_size`.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_slow(
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        this: &Self,
        expired: bool,
    ) -> *mut u8 {
        let marker = frame_marker!();
        allocator::note_inner::<A>();
        let period = if expired {
            sampler::on_countdown_expired(new_size, init::ensure_init)
        } else {
            None
        };
        if period.is_none() && !this.range.contains(ptr) {
            // SAFETY: forwarded GlobalAlloc::realloc contract; ptr belongs to the inner allocator.
            return unsafe { this.inner.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the GlobalAlloc::realloc contract makes new_size with the old alignment a valid
        // layout (non-zero, not overflowing when rounded up to the alignment).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: new_layout has a non-zero size; marker is a local of this frame.
        let sampled =
            period.and_then(|p| unsafe { this.alloc_sampled(new_layout, false, p, marker) });
        // SAFETY: new_layout is valid and non-zero (see above).
        let new = sampled.unwrap_or_else(|| unsafe { this.inner.alloc(new_layout) });
        if new.is_null() {
            return new;
        }
        // SAFETY: both blocks are valid for at least the smaller size and do not overlap (new is
        // a fresh allocation); ptr was allocated with layout, so dealloc may free it.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            this.dealloc(ptr, layout);
        }
        new
    }
}

// SAFETY: every block returned comes either from `inner` (and is freed by it: `dealloc` sends a
// pointer to the inner allocator exactly when it is outside the sampled arena's range, which the
// inner allocator never hands out since the range is our private mapping) or from the sampled
// arena via mallocx with the requested size and alignment (and is freed there with sdallocx).
// `dealloc` reads the range from `self.range`, which is filled before this value returns its first
// sampled block and never changes after, so for every block this value returned it is the range.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Profiled<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if sampler::countdown_expired(layout.size()) {
            // SAFETY: forwarded GlobalAlloc contract.
            return unsafe { Self::alloc_slow(layout, self, false) };
        }
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.inner.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if sampler::countdown_expired(layout.size()) {
            // SAFETY: forwarded GlobalAlloc contract.
            return unsafe { Self::alloc_slow(layout, self, true) };
        }
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.range.contains(ptr) {
            // SAFETY: ptr is in the sampled arena and was allocated with layout.
            unsafe { sampled_path::free_sampled(ptr, layout) }
        } else {
            // SAFETY: ptr is outside the sampled arena, so it came from the inner allocator.
            unsafe { self.inner.dealloc(ptr, layout) }
        }
    }

    /// Two calls of the slow path, each with its `expired` a constant, so that nothing of the
    /// countdown stays live across the range check: the countdown is one subtract from memory,
    /// not a load, a copy, a subtract and a store with the old value kept for the slow path.
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if sampler::countdown_expired(new_size) {
            // SAFETY: forwarded GlobalAlloc contract.
            return unsafe { Self::realloc_slow(ptr, layout, new_size, self, true) };
        }
        if self.range.contains(ptr) {
            // SAFETY: forwarded GlobalAlloc contract.
            return unsafe { Self::realloc_slow(ptr, layout, new_size, self, false) };
        }
        // SAFETY: forwarded GlobalAlloc contract; ptr came from the inner allocator.
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }
}

/// The current heap profile: per stack, in-use and accumulated estimates with variances,
/// per-thread figures, `/proc/self/maps`, annotations (drops, the allocator's figures: see
/// [`jeprof_dumpfmt::allocator`]), and symbols when `symbolize` is on.
/// Everything it allocates bypasses sampling.
pub fn snapshot() -> jeprof_dumpfmt::Profile {
    report::snapshot(base::settings::symbolize()).0
}

/// Writes the current profile in heap_v2 format to `out`.
pub fn dump_to(out: &mut dyn Write) -> Result<(), jeprof_dumpfmt::Error> {
    report::dump_to(out)
}

/// Writes the current profile to `path` atomically (a temporary file beside it, mode 0600, then
/// renamed over `path`).
pub fn dump(path: impl AsRef<Path>) -> Result<(), jeprof_dumpfmt::Error> {
    report::dump(path.as_ref())
}

/// Sets the mean sampling period R in bytes (0 turns sampling off). The calling thread restarts its
/// countdown now, other threads at their next sample.
pub fn set_sample_rate(bytes: u64) {
    settings_table::set_sample_rate(bytes);
}

/// Turns sampling on or off without changing R. Live samples stay recorded and are still removed
/// when freed.
pub fn set_active(active: bool) {
    settings_table::set_active(active);
}

/// The profiler's own figures: live samples, distinct stacks, metadata bytes, drops.
pub fn stats() -> Stats {
    report::stats()
}

/// Applies settings in the `JEPROF_SHIM` syntax (`key:value,...`) at run time. Every valid pair is
/// applied; the error lists the others. `arena_size` is refused once the arena exists. Then starts
/// the threads the settings now ask for (dump writer, leak history, OTLP pusher, HTTP listener).
pub fn configure(spec: &str) -> Result<(), ConfigError> {
    startup::configure(spec)
}

/// Makes sampling deterministic from now on: every thread restarts its countdown from a generator
/// seeded with `seed` and the thread's uid (the calling thread immediately). For tests and
/// reproducible experiments.
pub fn reseed(seed: u64) {
    settings_table::reseed(Some(seed));
}

/// Writes the next sequenced dump, jemalloc's manual kind: `<dump_prefix>.<pid>.<seq>.m<mseq>.heap`
/// (like `mallctl("prof.dump", NULL)`), atomically and mode 0600, on the calling thread; returns
/// its path. `seq` is shared with the automatic dumps; `max_dumps` applies. `dump_prefix`
/// defaults to `jeprof` (in the current directory), as jemalloc's `prof_prefix` does.
pub fn dump_next() -> Result<std::path::PathBuf, jeprof_dumpfmt::Error> {
    init::ensure_init();
    auto_dump::ensure_writer();
    auto_dump::write_sequenced(auto_dump::Kind::Manual)
}

/// The heap at its peak: the in-use figures of the live samples as they were when the estimated
/// live bytes were highest (within the `peak_growth` factor, 1.1 by default: the tracker
/// re-snapshots when the live bytes exceed its last snapshot's by that factor, tcmalloc's rule).
/// No accumulated figures; annotations `shim_peak_live_bytes` and `shim_peak_taken_unix_ms`;
/// symbols when `symbolize` is on. Empty before the first sample.
pub fn peak_snapshot() -> jeprof_dumpfmt::Profile {
    auto_dump::peak_profile(base::settings::symbolize())
}

/// The stacks whose live bytes are still growing, by the leak test of [`jeprof_dumpfmt::leaks`]
/// (default options: the last half of the history, two steps, false discovery rate 5% over every
/// stack) over the in-process history of per-stack live sums that the profiler records every
/// `leak_interval`. Fastest growing first; each named by its user frame. An error, saying when
/// there will be enough, while the history is too short.
pub fn leak_suspects() -> Result<Vec<LeakSuspect>, LeakHistoryError> {
    leak_suspects_with(&LeakOptions::default())
}

/// [`leak_suspects`] with the test's window, steps and false discovery rate.
pub fn leak_suspects_with(options: &LeakOptions) -> Result<Vec<LeakSuspect>, LeakHistoryError> {
    init::ensure_init();
    leak_history::ensure_recorder();
    Ok(leak_history::find(options)?
        .suspects
        .into_iter()
        .map(|(suspect, _)| suspect)
        .collect())
}

/// Opens an allocation window: [`AllocationProfile::stop`] returns a [`WindowProfile`] of every
/// sample allocated between the two, how much of it was freed in the window, and per-stack
/// lifetimes. Windows may overlap; while none is open they cost the sampled path one load.
pub fn start_allocation_profile() -> AllocationProfile {
    init::ensure_init();
    AllocationProfile::start()
}

/// The current heap profile in pprof form ([`snapshot`] through [`pprof_of`]): the four sample
/// types (`inuse_objects`, `inuse_space`, `alloc_objects`, `alloc_space`), unbiased and rounded
/// to integers, `period` R, the time taken, the profiler's notes as comments, and the labels
/// `program`, `build_id`, `hostname`, `pid` and `service` (see [`set_service`]) on every sample.
/// Gzip it with [`jeprof_dumpfmt::pprof::write_gz`] for `go tool pprof`.
pub fn pprof(options: &PprofOptions) -> jeprof_dumpfmt::pprof::PbProfile {
    profiler::pprof::encode(&snapshot(), options)
}

/// `profile` (a [`snapshot`], a [`peak_snapshot`], a [`WindowProfile`]'s) in pprof form, described
/// as [`pprof`] says. For a window, set [`PprofOptions::time`] and [`PprofOptions::duration`]
/// from the window's `started` and `duration`.
pub fn pprof_of(
    profile: &jeprof_dumpfmt::Profile,
    options: &PprofOptions,
) -> jeprof_dumpfmt::pprof::PbProfile {
    profiler::pprof::encode(profile, options)
}

/// Names the service this process runs, for the `service` label of pprof profiles (as the
/// `service:<name>` setting does); `""` removes it. At most 256 printable characters.
pub fn set_service(name: &str) -> Result<(), ConfigError> {
    settings_table::apply_one("service", name).map_err(|why| ConfigError {
        problems: vec![format!("service `{name}`: {why}")],
    })
}

/// Runs `f` with `scope` current on this thread (nested scopes: the innermost wins), restoring
/// the previous scope after, even if `f` panics. Allocations sampled meanwhile are charged to the
/// scope wherever they are freed. A `&str` label is interned on each call: keep a [`Scope`] to
/// enter a scope often.
pub fn scope_sync<R>(scope: impl Into<Scope>, f: impl FnOnce() -> R) -> R {
    let _scope = scope.into().enter();
    f()
}

/// `future` with `scope` current on whichever thread polls it, during each poll (nested scopes:
/// the innermost wins). It follows a task across a multi-threaded runtime's workers, with nothing
/// looked up on the allocation path; it needs no particular runtime.
///
/// ```
/// # async fn handle() {}
/// # async fn run() {
/// jeprof_shim::scope("tenant-42", handle()).await;
/// # }
/// ```
pub fn scope<F: std::future::Future>(scope: impl Into<Scope>, future: F) -> Scoped<F> {
    Scoped::new(scope.into(), future)
}

/// Every scope that allocated since start: estimated live objects and bytes with 95% intervals
/// (memory allocated in the scope and not yet freed, wherever it went), and allocated since start.
/// Computed from the live samples (one pass over them, under each shard's lock in turn).
pub fn scopes() -> Vec<ScopeStats> {
    profiler::scopes::all_scopes()
}

/// Calls `f` with [`scopes`] every `interval`, on a thread of its own, until the returned value is
/// dropped. Fails only if the thread cannot be spawned.
pub fn scope_report(
    interval: std::time::Duration,
    f: impl FnMut(&[ScopeStats]) + Send + 'static,
) -> std::io::Result<ScopeReporter> {
    profiler::scopes::scope_report(interval, f)
}

/// Writes a heap_v2 dump of `label`'s live samples only (in-use figures; jeprof reads it as any
/// dump), atomically. An error if no scope has that label.
pub fn dump_scope(label: &str, path: impl AsRef<Path>) -> Result<(), jeprof_dumpfmt::Error> {
    profiler::scopes::dump_scope(label, path.as_ref())
}

/// The profile [`dump_scope`] writes, or `None` if no scope has that label.
pub fn scope_snapshot(label: &str) -> Option<jeprof_dumpfmt::Profile> {
    profiler::scopes::scope_profile(label, base::settings::symbolize())
}

/// Scope labels refused since start because 4,095 distinct labels were already interned (their
/// allocations are charged to no scope).
pub fn scope_labels_dropped() -> u64 {
    parts::scopes::dropped()
}

/// Every scope's exact figures under [`ExactScopes`] (empty when it is not the allocator): live
/// bytes and blocks allocated in the scope and not yet freed, wherever they went, and bytes
/// allocated since start.
pub fn exact_scopes() -> Vec<ExactScopeStats> {
    exact::all()
}
