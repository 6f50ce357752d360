//! # jeprof-shim: an always-on sampling heap profiler in front of jemalloc
//!
//! [`Profiled`] wraps any [`GlobalAlloc`] (normally `tikv_jemallocator::Jemalloc`). It samples
//! allocations per byte with mean period R (default 512 KiB, like jemalloc's `lg_prof_sample:19`),
//! records the call stack of each sampled allocation, and writes heap profiles in jemalloc's
//! `heap_v2` format (through [`jeprof_dumpfmt`]) that the stock `jeprof` reads, symbolized
//! in-process so `jeprof --text heap.prof` needs no binary.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
//!     jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);
//!
//! fn main() {
//!     let kept: Vec<Vec<u8>> = (0..1000).map(|_| vec![0u8; 4096]).collect();
//!     jeprof_shim::dump("/tmp/heap.prof").expect("dump");
//!     // Or serve it: jeprof_shim::snapshot() is a jeprof_dumpfmt::Profile.
//!     let estimate = jeprof_shim::snapshot().totals().inuse;
//!     println!("≈{:.0} bytes live (truth {})", estimate.bytes, kept.len() * 4096);
//! }
//! ```
//!
//! Then `jeprof --text /tmp/heap.prof`. `cargo run --release --example demo -p jeprof-shim` runs a
//! workload with known live bytes per call site and prints estimate, 95% interval and truth.
//!
//! ## How it works
//! - **Sampling** (`sampler.rs`, the only code on the fast path): each thread keeps a countdown of
//!   bytes, drawn from the exponential distribution with mean R; every allocation subtracts its
//!   *requested* size. The fast path is that thread-local subtract and a branch on its borrow: no
//!   lock, no atomic read-modify-write, no allocation. When the size exceeds what was left, the
//!   allocation is a sample: it has probability `p = 1 − e^(−Z/R)` and stands for `1/p` objects and
//!   `usable/p` bytes (usable = jemalloc's size class, `sallocx`), with variance
//!   `usable²(1 − p)/p²`, summed per stack (`design-notes.md` §1–2). `realloc` counts as a free of
//!   the old block and an allocation of the new one. Everything the profiler keeps per thread
//!   (countdown, generator, settings generation, uid, stack top, sampled tcache, table) is one
//!   64-byte thread-local, and the settings the sampled path reads share one cache line, so a
//!   sample does not miss the cache once per variable.
//! - **The sampled arena** (`arena.rs`): sampled objects come from a dedicated jemalloc arena
//!   (`arenas.create` with custom extent hooks) over one reserved address range (64 GiB of address
//!   space by default, no memory). Each thread allocates and frees sampled objects through an
//!   explicit jemalloc tcache of its own (`tcache.create`) that holds nothing but sampled-arena
//!   objects (a free on another thread goes into that thread's sampled tcache), so a sample
//!   usually takes no arena lock; a `pthread_key` destructor destroys the tcache at thread exit
//!   (after Rust's thread-local destructors), and from then on, or if no tcache can be had, the
//!   thread uses `MALLOCX_TCACHE_NONE`. `dealloc` knows a pointer was sampled by one range check
//!   (the range is a power of two in size and aligned to it, so the check is `ptr ^ base < len`:
//!   two loads from one cache line, an xor and a compare). One object of each small size class is
//!   pinned in the arena so that sparse samples share slabs instead of creating and destroying one
//!   per sample. **Whatever `A` is, sampled objects always live in jemalloc's sampled arena**: the
//!   profiler always links jemalloc.
//! - **Stacks** (`stack.rs`, `table.rs`, `accum.rs`): captured on the sampled path only, into a
//!   fixed on-stack buffer of `max_frames` (default 128, at most 256), interned in one table capped
//!   at `max_stacks`. Each thread charges its samples to a table of its own (a 64-entry cache of
//!   the stacks it interned, with their pending figures, and its figures per stack), behind a mutex
//!   that only the thread, a snapshot or `fork` takes: a sample whose stack the thread has seen
//!   takes no shared lock and writes no shared line for it. A thread's table outlives it and is
//!   taken over by the next new thread, so tables are bounded by the threads alive at once and
//!   exited threads keep their figures. Live samples sit in 64 address-sharded tables; each record
//!   has room for a scope label.
//! - **Dumps**: per stack, in-use (live now) and accumulated (allocated since start) estimates,
//!   per-thread lines, `MAPPED_LIBRARIES` from `/proc/self/maps`, and by default a `--- symbol`
//!   section built in-process.
//!
//! ## Unwinders: which one runs when
//! - `unwinder:fp`: the frame-pointer walker (x86_64, aarch64). No lock, no DWARF, about a
//!   nanosecond per frame; every frame pointer is checked (word-aligned, strictly increasing,
//!   between the walker's own stack pointer and the thread's stack top from
//!   `pthread_getattr_np`), so it never faults. It only sees every frame when the whole program
//!   keeps frame pointers: Rust's standard library on current toolchains does; build your code
//!   with `RUSTFLAGS="-C force-frame-pointers=yes"`.
//! - `unwinder:backtrace`: `backtrace::trace_unsynchronized`, i.e. libgcc's DWARF unwinder:
//!   complete without frame pointers, several microseconds per sample, and `_Unwind_Find_FDE`
//!   takes a process-wide lock (the shim holds a read lock of its own around it so `fork` never
//!   happens mid-unwind).
//! - `unwinder:auto` (default): at first use, both unwinders walk the stack from one probe
//!   function; if the frame-pointer walk returns at least 3 frames and they are exactly libgcc's
//!   first ones (up to 8; the walk may stop early where code without frame pointers begins, such
//!   as glibc's thread start), frame pointers are used, else libgcc. The probe runs in this
//!   crate's code, so it reflects how the program (and this crate) was compiled.
//!   `stats().unwinder` says which won.
//!
//! Stacks start at the function that called the allocator (the profiler's own frames are skipped
//! by stack address, identically for both unwinders); the innermost frame is written as its return
//! address minus one, so that it points into the call instruction like every caller frame after
//! jeprof's own adjustment.
//!
//! ## Runtime control
//! [`dump`], [`dump_to`], [`snapshot`], [`set_sample_rate`], [`set_active`], [`stats`],
//! [`configure`], [`reseed`]. The environment variable `JEPROF_SHIM`, read once at first use, has
//! jemalloc's `MALLOC_CONF` syntax:
//! `JEPROF_SHIM=sample_rate:524288,active:true,seed:42,max_frames:128,symbolize:true,dump_on_exit:/path/heap.prof`.
//! Also `unwinder:fp|backtrace|auto`, `arena_size:<bytes>` (the reserved range; at least 4 MiB,
//! rounded up to a power of two) and `max_stacks:<n>`. `sample_rate:0` turns sampling off. Bad
//! pairs are reported on stderr and keep their defaults. `seed` makes sampling deterministic:
//! thread *k* (in the order threads first reach the sampler) draws from a generator seeded with
//! `seed` and *k*, and the profiler's own allocations do not consume the countdown (the guard
//! parks it), so a deterministic program samples the same allocations on every run.
//! `dump_on_exit` dumps from an `atexit` handler, only in the process that read the setting (a
//! forked child does not overwrite its parent's dump).
//!
//! ## Cost (measured; commands and the full table in the crate's README)
//! On a 2-thread churn of allocations of 16–4096 bytes (about 245,000 samples per CPU-second at
//! R = 512 KiB), relative to plain jemalloc in CPU time, on a shared 2-core machine, as the median
//! of 2,000 paired short runs (`CHURN_MODES=again,off,fp CHURN_ROUNDS=2000
//! CHURN_ALLOCATIONS=2000000 RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p jeprof-shim
//! --bench churn --bench churn_plain`): sampling off 1.015× (95% interval 1.012–1.018), R = 512 KiB
//! with frame pointers 1.062× (1.058–1.064), 1.056× without the one-time set-up of 0.55 ms per
//! process (the bench measures it on a tiny churn); two identical runs of plain jemalloc 1.001×
//! (0.998–1.004), and code placement alone moves plain jemalloc by up to 0.7%; runs at different
//! hours of one day gave sampling off 1.017–1.039 and frame pointers 1.057–1.072. In steady state
//! (`CHURN_WARMUP=200000`: one-time costs left out, the cost per allocation of a long-running
//! process) sampling off 1.009× (1.004–1.012) and frame pointers 1.045× (1.042–1.049), and at other
//! hours 1.005–1.013 and 1.031–1.048; a sample then costs about 160 ns of CPU all-in (the bench's
//! `CHURN_RATES` varies R). Each of those figures is one code layout's: averaged over 8 layouts
//! (`benches/build-layouts.sh` and `CHURN_LAYOUTS`; lld's `--shuffle-sections`; 200 rounds),
//! sampling off costs 1.030× (1.023–1.040; per layout 0.998–1.046) and frame pointers 1.067×
//! (1.056–1.075; per layout 1.029–1.079), 1.027–1.044× and 1.062–1.069× over three runs, in line with
//! the 9.4 instructions sampling off adds to plain jemalloc's 199 per allocation–free pair (4.7%,
//! `callgrind`). With libgcc about 1.35–1.43×; jemalloc's own profiler
//! (`prof:true,lg_prof_sample:19`) 1.45–1.58×. The fast path with sampling off is 7 instructions
//! per allocation–free pair (3 in `alloc`, 4 in `dealloc`); `callgrind`'s 9.4 includes the register
//! moves around them. One sampled
//! allocation (capture and record, 32 frames): 0.12–0.27 µs with frame pointers, about 5 µs with
//! libgcc. A dump of 100,000 live samples: about 10 ms raw, about 100 ms symbolized, with a
//! symbolizer peak of about 57 MB that is released right after (about 20 KB kept).
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
//!   everywhere: symbolizer, unwinder, arena creation, `dump_on_exit`, thread-table registry,
//!   thread tables, stack table, live shards), so a child can allocate and dump while other threads
//!   of the parent were inside the profiler (tested).
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
//!   costs jemalloc about 30 KiB of metadata and keeps freed sampled objects cached (within
//!   jemalloc's usual per-size-class limits, in the sampled arena's range) until the thread exits.
//!   After `fork`, the tcaches of the parent's other threads stay allocated (and their cached
//!   objects unused) in the child.
//! - Not async-signal-safe: a sampled allocation takes locks, like jemalloc itself.
//! - jeprof's flat column charges every stack's leaf, which is the allocating function with the
//!   allocator's inlined frames (`alloc::alloc::alloc`, `__rust_alloc`, `Profiled::alloc`) named
//!   innermost; use the cumulative column (or `--focus`) per call site.
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::io::Write;
use std::path::Path;

mod accum;
mod arena;
mod config;
mod exit_key;
mod profiler;
mod sampler;
mod stack;
mod symbolize;
mod table;

pub use config::{
    ConfigError, DEFAULT_ARENA_SIZE, DEFAULT_MAX_FRAMES, DEFAULT_MAX_STACKS, DEFAULT_SAMPLE_RATE,
};
pub use jeprof_dumpfmt;
pub use stack::{Unwinder, MAX_FRAMES_LIMIT};

/// A [`GlobalAlloc`] that samples allocations into a heap profile and serves everything else from
/// `A`. See the crate docs.
#[derive(Debug)]
pub struct Profiled<A> {
    inner: A,
    /// The sampled range as this value knows it; what `dealloc` compares pointers with.
    range: arena::RangeCopy,
}

impl<A> Profiled<A> {
    /// Wraps `inner`. `const`, so it can initialise a `#[global_allocator]` static.
    pub const fn new(inner: A) -> Profiled<A> {
        Profiled {
            inner,
            range: arena::RangeCopy::new(),
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
    /// [`profiler::alloc_sampled`], then the range copy filled before the block leaves this value:
    /// the one way a sampled block is handed out, so `dealloc` always recognises it.
    ///
    /// # Safety
    /// As for [`profiler::alloc_sampled`].
    #[inline(always)]
    unsafe fn alloc_sampled(
        &self,
        layout: Layout,
        zeroed: bool,
        period: u64,
        marker: usize,
    ) -> Option<*mut u8> {
        // SAFETY: forwarded contract.
        let ptr = unsafe { profiler::alloc_sampled(layout, zeroed, period, marker) }?;
        self.range.fill();
        Some(ptr)
    }

    /// The allocation path once the countdown expired. `layout` comes first and `this` after it
    /// so that the fast path reaches here with the size still in the register it arrived in (no
    /// moves before the sampling branch).
    #[cold]
    #[inline(never)]
    unsafe fn alloc_slow(layout: Layout, this: &Self, zeroed: bool) -> *mut u8 {
        let marker = frame_marker!();
        if let Some(period) = sampler::on_countdown_expired(layout.size()) {
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
            sampler::on_countdown_expired(new_size)
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
            unsafe { profiler::free_sampled(ptr, layout) }
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

/// How many samples were dropped, by reason. A dropped sample's allocation is served by the inner
/// allocator and not recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dropped {
    /// The sampled arena's reserved range was full (raise `arena_size`).
    pub arena_exhausted: u64,
    /// The sampled arena could not be created (address space reservation or `arenas.create`
    /// failed).
    pub arena_unavailable: u64,
    /// The sample had a new stack and the stack table was at `max_stacks`.
    pub stack_table_full: u64,
}

impl Dropped {
    /// All drops together.
    pub fn total(&self) -> u64 {
        self.arena_exhausted + self.arena_unavailable + self.stack_table_full
    }
}

/// What in-process symbolization cost, measured with jemalloc's per-thread counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SymbolizerCost {
    /// Addresses looked up.
    pub addresses: usize,
    /// Highest net bytes allocated by the dumping thread during symbolization (debug-info caches
    /// and names), sampled between lookups.
    pub peak_bytes: u64,
    /// Net bytes still allocated after `backtrace::clear_symbol_cache()` (the names themselves).
    pub retained_bytes: u64,
}

/// A snapshot of the profiler's own state.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Sampled objects currently live.
    pub live_samples: u64,
    /// Distinct stacks recorded since start.
    pub distinct_stacks: u64,
    /// Bytes held by the profiler's tables (capacity).
    pub metadata_bytes: u64,
    /// Samples recorded since start.
    pub samples_taken: u64,
    /// Per-thread tables held: at most as many as threads ever sampled at once (an exited
    /// thread's table, with its figures, is taken over by the next new thread).
    pub thread_tables: u64,
    /// Samples dropped since start, by reason.
    pub dropped: Dropped,
    /// The configured mean sampling period R in bytes (0 = off).
    pub sample_rate: u64,
    /// Whether sampling is active.
    pub active: bool,
    /// The unwinder in use.
    pub unwinder: Unwinder,
    /// Bytes of the sampled arena's range handed to jemalloc.
    pub arena_bytes_used: u64,
    /// Size of the sampled arena's reserved range (0 until the first sample).
    pub arena_bytes_reserved: u64,
    /// Cost of the last in-process symbolization, if one ran.
    pub last_symbolization: Option<SymbolizerCost>,
}

/// The current heap profile: per stack, in-use and accumulated estimates with variances,
/// per-thread figures, `/proc/self/maps`, annotations (drops), and symbols when `symbolize` is on.
/// Everything it allocates bypasses sampling.
pub fn snapshot() -> jeprof_dumpfmt::Profile {
    profiler::snapshot(config::symbolize()).0
}

/// Writes the current profile in heap_v2 format to `out`.
pub fn dump_to(out: &mut dyn Write) -> Result<(), jeprof_dumpfmt::Error> {
    let _guard = sampler::Guard::enter();
    let profile = snapshot();
    jeprof_dumpfmt::write::write(&profile, out, &jeprof_dumpfmt::WriteOptions::default())
}

/// Writes the current profile to `path` atomically (a temporary file beside it, mode 0600, then
/// renamed over `path`).
pub fn dump(path: impl AsRef<Path>) -> Result<(), jeprof_dumpfmt::Error> {
    let _guard = sampler::Guard::enter();
    let profile = snapshot();
    jeprof_dumpfmt::write::write_file(
        &profile,
        path.as_ref(),
        &jeprof_dumpfmt::WriteOptions::default(),
    )
}

/// Sets the mean sampling period R in bytes (0 turns sampling off). The calling thread restarts its
/// countdown now, other threads at their next sample.
pub fn set_sample_rate(bytes: u64) {
    config::set_sample_rate(bytes);
}

/// Turns sampling on or off without changing R. Live samples stay recorded and are still removed
/// when freed.
pub fn set_active(active: bool) {
    config::set_active(active);
}

/// The profiler's own figures: live samples, distinct stacks, metadata bytes, drops.
pub fn stats() -> Stats {
    profiler::stats()
}

/// Applies settings in the `JEPROF_SHIM` syntax (`key:value,...`) at run time. Every valid pair is
/// applied; the error lists the others. `arena_size` is refused once the arena exists.
pub fn configure(spec: &str) -> Result<(), ConfigError> {
    let _guard = sampler::Guard::enter();
    profiler::ensure_init();
    config::apply(spec)
}

/// Makes sampling deterministic from now on: every thread restarts its countdown from a generator
/// seeded with `seed` and the thread's uid (the calling thread immediately). For tests and
/// reproducible experiments.
pub fn reseed(seed: u64) {
    sampler::set_seed(Some(seed));
}
