//! # jeprof-shim: an always-on sampling heap profiler in front of jemalloc
//!
//! [`Profiled`] wraps any [`GlobalAlloc`] (normally `tikv_jemallocator::Jemalloc`). It samples
//! allocations per byte with mean period R (default 512 KiB, like jemalloc's `lg_prof_sample:19`),
//! records the call stack of each sampled allocation, and writes heap profiles in jemalloc's
//! `heap_v2` format (through [`jeprof_dumpfmt`]) that the stock `jeprof` reads, symbolized
//! in-process so `jeprof --text heap.prof` needs no binary.
//!
//! ```
//! #[global_allocator]
//! static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
//!     jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);
//!
//! fn main() {
//!     let kept: Vec<Vec<u8>> = (0..1000).map(|_| vec![0u8; 4096]).collect();
//!     let path = std::env::temp_dir().join(format!("heap-{}.prof", std::process::id()));
//!     jeprof_shim::dump(&path).expect("dump");
//!     // Or serve it: jeprof_shim::snapshot() is a jeprof_dumpfmt::Profile.
//!     let estimate = jeprof_shim::snapshot().totals().inuse;
//!     println!("≈{:.0} bytes live (truth {})", estimate.bytes, kept.len() * 4096);
//!     # std::fs::remove_file(&path).unwrap();
//! }
//! ```
//!
//! Then `jeprof --text heap.prof`. `cargo run --release --example demo -p jeprof-shim` runs a
//! workload with known live bytes per call site and prints estimate, 95% interval and truth.
//!
//! ## How it works
//! - **Sampling**: each thread keeps a countdown of bytes, drawn from the exponential distribution
//!   with mean R; every allocation subtracts its *requested* size. The fast path is that
//!   thread-local subtract and a branch on its borrow: no lock, no atomic read-modify-write, no
//!   allocation. When the size exceeds what was left, the allocation is a sample: it has
//!   probability `p = 1 − e^(−Z/R)` and stands for `1/p` objects and `usable/p` bytes (usable =
//!   jemalloc's size class), with variance `usable²(1 − p)/p²`, summed per stack
//!   (`docs/design.md` §1–2; the weight is [`jeprof_dumpfmt::math::SampleWeight::of_allocation`]).
//!   `realloc` counts as a free of the old block and an allocation of the new one.
//! - **The sampled arena** (`docs/design.md` §7): sampled objects come from a dedicated jemalloc
//!   arena over one reserved, power-of-two-aligned address range (64 GiB of address space by
//!   default, no memory), so `dealloc` knows a pointer was sampled by one range check
//!   (`ptr ^ base < len`). Each thread allocates and frees sampled objects through an explicit
//!   jemalloc tcache of its own, so a sample usually takes no arena lock. **Whatever `A` is,
//!   sampled objects live in jemalloc's sampled arena**: the profiler always links jemalloc.
//! - **Stacks** (`docs/design.md` §8): captured on the sampled path only, into a fixed on-stack
//!   buffer of `max_frames` frames, interned in one table capped at `max_stacks`. Each thread
//!   charges its samples to a table of its own (with a 64-entry cache of the stacks it has seen),
//!   so a sample of a known stack takes no shared lock; an exited thread's table, with its
//!   figures, is taken over by the next new thread. Live samples sit in 64 address-sharded tables.
//! - **Dumps** (`docs/design.md` §3–6): per stack, in-use and accumulated estimates, per-thread
//!   lines, `MAPPED_LIBRARIES`, and by default a `--- symbol` section built in-process.
//!
//! The source is layered; each module imports only the layers below it:
//!
//! ```text
//! lib.rs       Profiled, the public functions
//! http/        the `http` feature: listener → handlers (import profiler/, parts/, base/)
//! exact.rs     ExactScopes, the exact per-scope counting wrapper (imports parts/scopes, base/)
//! c_api.rs     the C malloc family over the same sampled path, for libjeprof_preload.so
//!              (imports profiler/init, profiler/sampled_path, parts/sampler, parts/sampled_arena)
//! profiler/    control (JEPROF_SHIM, setters), peak (tracker) → sampled_path → report
//!              (snapshots, stats, dumps) → window, scopes, pprof, auto_dump (sequenced dumps,
//!              writer thread) → hooks (fork, exit) → init
//! parts/       sampler · capture (+ eh_frame_unwind) · sampled_arena · stacks · live_samples ·
//!              thread_totals · symbolize · build_ids · triggers · windows · scopes (each
//!              imports only base/)
//! base/        thread (per-thread state, re-entrancy guard) · settings · sync (lock, cache line,
//!              exit key, loom traits) · hash (each imports nothing of the crate)
//! ```
//!
//! ## Unwinders
//! - `unwinder:fp`: the frame-pointer walker (x86_64, aarch64). No lock, no DWARF, about a
//!   nanosecond per frame; every frame pointer is checked against the thread's stack bounds, so
//!   it never faults. It sees every frame only when the whole program keeps frame pointers:
//!   Rust's standard library on current toolchains does; build your code with
//!   `RUSTFLAGS="-C force-frame-pointers=yes"`.
//! - `unwinder:eh_frame` (x86_64 Linux): reads the loaded objects' `.eh_frame` unwind tables in
//!   place (parsed by gimli), caching a compact rule per return address:
//!   complete without frame pointers, the same stacks as libgcc, no lock held across the walk,
//!   no allocation once warm, never faults; it stops where unwind information ends.
//! - `unwinder:backtrace`: libgcc's DWARF unwinder: complete without frame pointers, several
//!   microseconds per sample, and it takes a process-wide lock.
//! - `unwinder:auto` (default): at first use the unwinders walk the stack from one probe
//!   function; if the frame-pointer walk returns at least 3 frames and they are exactly libgcc's
//!   first ones, frame pointers are used; else `eh_frame` if its walk equals libgcc's; libgcc
//!   only as the last resort. `stats().unwinder` says which won.
//!
//! Stacks start at the function that called the allocator; the innermost frame is written as its
//! return address minus one, so it points into the call instruction like every caller frame after
//! jeprof's own adjustment.
//!
//! ## Settings
//! [`dump`], [`dump_to`], [`snapshot`], [`set_sample_rate`], [`set_active`], [`stats`],
//! [`configure`], [`reseed`], [`dump_next`], [`peak_snapshot`], [`start_allocation_profile`].
//! The environment variable `JEPROF_SHIM`, read once at first use, has
//! jemalloc's `MALLOC_CONF` syntax:
//! `JEPROF_SHIM=sample_rate:524288,active:true,seed:42,max_frames:128,symbolize:true,dump_on_exit:/path/heap.prof`.
//! Also `unwinder:fp|eh_frame|backtrace|auto`, `arena_size:<bytes>` (the reserved range; 4 MiB to 32 TiB,
//! rounded up to a power of two; an arena that cannot be created is said once on stderr) and
//! `max_stacks:<n>`, `service:<name>` (pprof's `service` label) and `http:<ip:port>` (with the
//! `http` feature, below). `sample_rate:0` turns sampling off. Bad
//! pairs are reported on stderr and keep their defaults. `seed` makes sampling deterministic:
//! thread *k* (in the order threads first reach the sampler) draws from a generator seeded with
//! `seed` and *k*, and the profiler's own allocations do not consume the countdown, so a
//! deterministic program samples the same allocations on every run. `dump_on_exit` dumps from an
//! `atexit` handler, only in the process that read the setting (a forked child does not
//! overwrite its parent's dump) unless the path has `%p`: `%p` in `dump_on_exit` and
//! `dump_prefix` is replaced by the process id, and then a forked child dumps to its own file.
//!
//! ## Automatic dumps, the peak heap, allocation windows
//! Sequenced dumps are named as jemalloc names them, `<dump_prefix>.<pid>.<seq>.<kind>.heap`
//! with `seq` counting every sequenced dump of the process from 0 and kind `i<n>` (interval),
//! `u<n>` (peak), `m<n>` (manual, [`dump_next`]) or `f` (final, at exit); `<n>` counts that kind.
//! - `dump_prefix:<path prefix>` (default `jeprof`; its directory must exist);
//! - `dump_interval:<bytes>`: a dump each time that many bytes were allocated process-wide,
//!   counted in *estimated* bytes (the samples' weights), so counting costs nothing between
//!   samples;
//! - `dump_peak:<factor>`: a dump of the peak heap when the estimated live bytes exceed the last
//!   dumped peak by the factor (> 1);
//! - `peak_growth:<factor>` (default 1.1): the peak tracker re-snapshots ([`peak_snapshot`]) when
//!   the estimated live bytes exceed its last snapshot's by this factor (tcmalloc's rule);
//! - `max_dumps:<n>` (default 0, all): beyond `n`, the oldest sequenced dump *this process* wrote
//!   is removed;
//! - `dump_final:true`: a final dump from the `atexit` handler (jemalloc's `prof_final`).
//!
//! Interval and peak dumps are written by a background thread, never inside an allocation: the
//! sampled path only adds to two counters and, when a threshold is crossed, wakes the thread with a
//! futex (no allocation, no lock). The thread is started outside any allocation (by [`configure`],
//! [`dump_next`], before `main` when `JEPROF_SHIM` asks for automatic dumps, and in a forked
//! child, which gets its own); its allocations are never sampled. Allocating threads wait for a
//! dump at most as long as it takes to copy the tables. Windows ([`start_allocation_profile`])
//! return a [`WindowProfile`] of what was allocated between start and stop, what of it is still
//! live, and per-stack lifetimes; they may overlap, and cost the sampled path one load while none
//! is open. See `docs/design.md` §10.
//!
//! ## pprof and HTTP
//! [`pprof`] returns the current profile as pprof's `profile.proto` message, [`pprof_of`] any
//! profile (a [`peak_snapshot`], a [`WindowProfile`]'s): four sample types (`inuse_objects`,
//! `inuse_space`, `alloc_objects`, `alloc_space`), `period` R, `time_nanos`, `duration_nanos`, the
//! default sample type ([`PprofOptions`]), the profiler's notes as comments, and the labels
//! `program`, `build_id` (GNU build id, read from memory), `hostname`, `pid` and `service`
//! (`service:<name>` or [`set_service`]) on every sample.
//!
//! With the `http` feature (no async runtime), `serve("127.0.0.1:6060")` (or the setting
//! `http:127.0.0.1:6060`, started before `main`) serves `/debug/pprof/heap`, `/debug/pprof/allocs`
//! (Go's semantics; `?seconds=N` gives what was allocated in N seconds with the current in-use
//! figures), `/debug/pprof/peak`, and `/pprof/heap`, `/pprof/symbol`, `/pprof/cmdline` for
//! `jeprof --text http://host:port/pprof/heap`; `http::handle` is the same as a plain function to
//! mount in a program's own router (`examples/axum.rs`). Bind to loopback: a profile reveals code
//! addresses and the memory map. Nothing the listener allocates is sampled. See the `http` module
//! and `docs/design.md` §11.
//!
//! ## Memory per scope
//! A [`Scope`] (a label interned into a 16-bit id; at most 4,095) is made current on a thread by
//! [`Scope::enter`] or [`scope_sync`], or on whichever thread polls a future by [`scope()`]; nested
//! scopes: the innermost wins. Each sample records the scope current at allocation and its free
//! credits that scope wherever it happens, so [`scopes`] gives per scope the estimated live bytes
//! and objects of what it allocated and has not freed (memory moved to other tasks included), with
//! 95% intervals, and what it allocated since start; the fast path never reads the scope.
//! [`scope_report`] calls back periodically, [`dump_scope`] writes one scope's dump, whole dumps
//! carry per-scope `# scope` comment lines, pprof labels scoped samples `scope=<label>`, and the
//! HTTP heap endpoints take `?scope=`. [`ExactScopes`] (opt-in, as the global allocator type)
//! counts exactly with a `max(16, align)`-byte header per block ([`exact_scopes`]). See
//! `docs/design.md` §12.
//!
//! ## Programs that cannot be rebuilt
//! [`c_api`] is the same profiler behind C's `malloc` family (sizeless `free` and `realloc`,
//! `errno`, the aligned variants); the `jeprof-preload` crate exports it as
//! `libjeprof_preload.so`, which `LD_PRELOAD` puts in front of an unmodified program
//! (`preload/README.md`, `docs/design.md` §16). `%p` in `dump_on_exit` and `dump_prefix` is the
//! process id, so that children of `fork` and `exec` write files of their own.
//!
//! ## Guarantees
//! - Estimates are unbiased per sample and summed per stack; each stack carries its variance, so
//!   [`jeprof_dumpfmt::Estimate::bytes_interval_95`] is a 95% interval (tested over 100 seeds:
//!   mean within 2% of the truth, 90–99% of intervals cover it; see `tests/accuracy.rs`).
//! - jeprof prints, per function, the shim's own figures within the bound `jeprof-dumpfmt`
//!   guarantees (tested against the real jeprof script, `tests/jeprof_agrees.rs`).
//! - The profiler's own allocations (tables, dumps, symbolization) never recurse into sampling
//!   (a `const`-initialised thread-local guard), and all thread-local state is `const`-initialised
//!   without destructors, so allocations before `main`, in exiting threads and during thread-local
//!   destruction work (they are sampled or passed through, never lost).
//! - `fork`: `pthread_atfork` handlers hold every profiler lock across `fork` (in one order used
//!   everywhere: the writer's dump in progress, symbolizer, unwinder, arena creation,
//!   `dump_on_exit`, `dump_prefix`, `service`, the `http` address, the scope labels, the list of
//!   written dumps,
//!   windows, peak tracker, thread-table registry, thread tables, stack table, live shards), so a
//!   child can allocate and dump while other threads of the parent were inside the profiler
//!   (tested); a child gets a dump writer of its own when automatic dumps are on (tested).
//! - The publication of the sampled range to `dealloc` and the handover of thread tables are
//!   checked by loom models (`cargo test -p jeprof-shim --features loom --lib loom`).
//! - Bounded metadata: at most `max_stacks` distinct stacks; a sample with a new stack beyond that,
//!   or that the exhausted arena cannot serve, is *dropped*: its allocation comes from the inner
//!   allocator unrecorded, and the drop is counted in [`stats`] and in the dump (`# shim_…`
//!   annotation lines that jeprof ignores). Never a crash.
//!
//! ## Limits
//! - One profiler per process: the state is global, whichever `Profiled` value allocates.
//! - Settings changed at run time reach other threads at their next sample (or within 64 MiB of
//!   allocation while sampling is off).
//! - Snapshots are consistent per shard, not across shards: frees racing a dump may or may not show;
//!   a stack first seen while a snapshot runs may be left out of it.
//! - Each thread that ever sampled holds a table of its own (about 4 KiB plus its per-stack
//!   figures) that is never freed, only handed to the next new thread: memory bounded by the most
//!   threads that sampled at once.
//! - The symbolizer's peak is measured with jemalloc's per-thread counters between address lookups
//!   (temporaries inside one lookup are missed), and only covers allocations that reach jemalloc.
//! - Each thread that allocates or frees a sampled object holds one of jemalloc's explicit tcaches
//!   (at most 4,094 at a time in a process; threads beyond that, and threads past their exit hook,
//!   use `MALLOCX_TCACHE_NONE` and take an arena lock per sampled allocation and free). A tcache
//!   costs jemalloc about 30 KiB of metadata and keeps freed sampled objects cached until the
//!   thread exits. After `fork`, the tcaches of the parent's other threads stay allocated in the
//!   child.
//! - Not async-signal-safe: a sampled allocation takes locks, like jemalloc itself.
//! - jeprof's flat column charges every stack's leaf, which is the allocating function with the
//!   allocator's inlined frames (`alloc::alloc::alloc`, `__rust_alloc`, `Profiled::alloc`) named
//!   innermost; use the cumulative column (or `--focus`) per call site.
//!
//! ## Cost
//! With sampling off, the fast path is 7 instructions per allocation–free pair (3 in `alloc`, 4 in
//! `dealloc`; `callgrind` counts 8.8 with the register moves around them). At R = 512 KiB a sample
//! costs about 1,260 instructions (about 180 ns) with frame pointers and about 20,000 with libgcc,
//! on an allocation churn. Figures, their date and the commands that measure them:
//! `bench/RESULTS.md`.
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::io::Write;
use std::path::Path;

mod base;
pub mod c_api;
mod exact;
#[cfg(feature = "http")]
pub mod http;
mod parts;
mod profiler;

pub use base::settings::{
    DEFAULT_ARENA_SIZE, DEFAULT_MAX_FRAMES, DEFAULT_MAX_STACKS, DEFAULT_SAMPLE_RATE,
};
pub use exact::{ExactScopeStats, ExactScopes};
#[cfg(feature = "http")]
pub use http::serve;
pub use jeprof_dumpfmt;
pub use parts::capture::{Unwinder, MAX_FRAMES_LIMIT};
pub use parts::symbolize::SymbolizerCost;
pub use profiler::control::ConfigError;
pub use profiler::pprof::{PprofOptions, SampleType};
pub use profiler::report::Stats;
pub use profiler::sampled_path::Dropped;
pub use profiler::scopes::{Scope, ScopeGuard, ScopeReporter, ScopeStats, Scoped};
pub use profiler::window::{AllocationProfile, StackLifetimes, WindowProfile};

use parts::{sampled_arena, sampler};
use profiler::{auto_dump, control, init, report, sampled_path};

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

    /// The reallocation path once the countdown expired or `ptr` was sampled.
    ///
    /// # Safety
    /// The `GlobalAlloc::realloc` contract for `ptr`, `layout` and `new_size`.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_slow(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        expired: bool,
    ) -> *mut u8 {
        let marker = frame_marker!();
        let period = if expired {
            sampler::on_countdown_expired(new_size, init::ensure_init)
        } else {
            None
        };
        if period.is_none() && !self.range.contains(ptr) {
            // SAFETY: forwarded GlobalAlloc::realloc contract; ptr belongs to the inner allocator.
            return unsafe { self.inner.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the GlobalAlloc::realloc contract makes new_size with the old alignment a valid
        // layout (non-zero, not overflowing when rounded up to the alignment).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: new_layout has a non-zero size; marker is a local of this frame.
        let sampled =
            period.and_then(|p| unsafe { self.alloc_sampled(new_layout, false, p, marker) });
        // SAFETY: new_layout is valid and non-zero (see above).
        let new = sampled.unwrap_or_else(|| unsafe { self.inner.alloc(new_layout) });
        if new.is_null() {
            return new;
        }
        // SAFETY: both blocks are valid for at least the smaller size and do not overlap (new is
        // a fresh allocation); ptr was allocated with layout, so dealloc may free it.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
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

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let expired = sampler::countdown_expired(new_size);
        if !expired && !self.range.contains(ptr) {
            // SAFETY: forwarded GlobalAlloc contract; ptr came from the inner allocator.
            return unsafe { self.inner.realloc(ptr, layout, new_size) };
        }
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.realloc_slow(ptr, layout, new_size, expired) }
    }
}

/// The current heap profile: per stack, in-use and accumulated estimates with variances,
/// per-thread figures, `/proc/self/maps`, annotations (drops), and symbols when `symbolize` is on.
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
    control::set_sample_rate(bytes);
}

/// Turns sampling on or off without changing R. Live samples stay recorded and are still removed
/// when freed.
pub fn set_active(active: bool) {
    control::set_active(active);
}

/// The profiler's own figures: live samples, distinct stacks, metadata bytes, drops.
pub fn stats() -> Stats {
    report::stats()
}

/// Applies settings in the `JEPROF_SHIM` syntax (`key:value,...`) at run time. Every valid pair is
/// applied; the error lists the others. `arena_size` is refused once the arena exists.
pub fn configure(spec: &str) -> Result<(), ConfigError> {
    let result = init::configure(spec);
    // Outside any allocation: the place to start the listener an `http` setting asks for.
    #[cfg(feature = "http")]
    http::listener_for_settings();
    result
}

/// Makes sampling deterministic from now on: every thread restarts its countdown from a generator
/// seeded with `seed` and the thread's uid (the calling thread immediately). For tests and
/// reproducible experiments.
pub fn reseed(seed: u64) {
    control::reseed(Some(seed));
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
    let name = control::service_name(name).map_err(|why| ConfigError {
        problems: vec![format!("service `{name}`: {why}")],
    })?;
    *base::sync::lock(&base::settings::SERVICE) = name;
    Ok(())
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
