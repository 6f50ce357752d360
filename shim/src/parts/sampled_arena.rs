//! The sampled arena: a jemalloc arena whose extents all come from one reserved address range, so
//! that "was this pointer sampled?" is one range compare (`docs/design.md` §7).
//!
//! At the first sample we reserve `arena_size` bytes of address space (`PROT_NONE`,
//! `MAP_NORESERVE`: no memory, no commit charge; when the default 64 GiB cannot be had, as under
//! valgrind or `ulimit -v`, the largest power of two down to 4 MiB that can, said once on stderr)
//! and create an arena with `arenas.create` and our
//! [`extent_hooks_t`]. The alloc hook hands out aligned pieces of the range with an atomic bump
//! pointer and makes them read-write with `mprotect`; nothing is ever unmapped (dalloc opts out, so
//! jemalloc retains and reuses extents), and purging uses `madvise`. When the range is exhausted
//! the hook returns NULL, `mallocx` fails, and the caller falls back to the inner allocator.
//!
//! Sampled objects are allocated and freed with `MALLOCX_ARENA(a) | MALLOCX_TCACHE(t)`, where `t` is
//! an explicit jemalloc thread cache (`tcache.create`) that the calling thread uses for sampled
//! objects and nothing else, so it never mixes them with ordinary memory (an explicit tcache only
//! ever holds what was freed into it, and refills from the arena it is given). A free on another
//! thread goes into *that* thread's sampled tcache, which holds sampled-arena objects only as well.
//! The tcache is destroyed (flushed back to the arena, its index released) by a `pthread_key`
//! destructor at thread exit; from then on, and wherever a tcache cannot be had, the thread uses
//! `MALLOCX_TCACHE_NONE` as before.
//!
//! The cache is kept for its cost, not only for the arena's locks: sampled objects of a size class
//! come and go again and again where samples are many, and a cache of them serves most samples
//! without entering the arena and keeps a slab in use between them. Without it (every sampled
//! allocation and free `MALLOCX_TCACHE_NONE`, one bin lock each), a class whose live samples
//! outgrow the slab pinned for it builds a slab for the next sample and hands it back when that
//! sample dies, and an object of 16–32 KiB (which jemalloc caches) takes the extent path both
//! ways; that measured several hundred instructions more per sample where samples are many, and
//! saved a few hundred only where they are few (`docs/design.md` §7).

use std::cell::UnsafeCell;
use std::ffi::{c_uint, c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use tikv_jemalloc_sys as jem;

use crate::base::sync::{ExitKey, Word};
use crate::base::thread;

/// Offset of the first byte of the range not yet handed to jemalloc.
static BUMP: AtomicUsize = AtomicUsize::new(0);
/// The words every sample reads ([`flags`], [`RangeCopy::fill`]), in one cache line of
/// their own that is written only while the arena is created, so it stays cached and shared.
#[repr(C, align(64))]
struct HotWords {
    /// Length of the reserved range, a power of two (0 until reserved). Written once, with
    /// Release, after `range_base`; read with Acquire, so a thread that sees the length sees the
    /// base.
    range_len: AtomicUsize,
    /// Start of the reserved range, aligned to its length. Written once, before `range_len`; until
    /// then [`NO_BASE`].
    range_base: AtomicUsize,
    /// jemalloc's index of the sampled arena (valid when `state == READY`).
    arena_index: AtomicUsize,
    /// `UNINIT`, `READY` or `FAILED`. Stored with Release after everything else; loaded with
    /// Acquire by [`flags`].
    state: AtomicU8,
}

/// The base before the range exists: no user-space address (all below 2^63) xors with it to
/// anything below 2^63, so with any length it matches nothing. [`RangeCopy::contains`] may read an
/// old base with a new length (or the reverse) and is still never wrong.
const NO_BASE: usize = 1 << (usize::BITS - 1);

static HOT: HotWords = HotWords {
    range_len: AtomicUsize::new(0),
    range_base: AtomicUsize::new(NO_BASE),
    arena_index: AtomicUsize::new(0),
    state: AtomicU8::new(UNINIT),
};
/// Serialises creation (and is held across `fork`).
pub(crate) static INIT_LOCK: Mutex<()> = Mutex::new(());

const UNINIT: u8 = 0;
const READY: u8 = 1;
const FAILED: u8 = 2;

/// The hook table jemalloc keeps a pointer to for the arena's whole life.
struct Hooks(UnsafeCell<jem::extent_hooks_t>);

// SAFETY: the table is written only by its initialiser and never again; jemalloc only reads it
// (it takes a `*mut` for C API reasons), so sharing it between threads is sharing immutable data.
unsafe impl Sync for Hooks {}

static HOOKS: Hooks = Hooks(UnsafeCell::new(jem::extent_hooks_t {
    alloc: Some(extent_alloc),
    dalloc: Some(extent_dalloc),
    destroy: None,
    commit: None,
    decommit: None,
    purge_lazy: Some(extent_purge_lazy),
    purge_forced: Some(extent_purge_forced),
    split: Some(extent_split),
    merge: Some(extent_merge),
}));

/// The sampled range's two words as one `Profiled` value saw them when it first handed
/// out a sampled object. `Profiled::dealloc` reads these instead of the global words: the
/// allocator is a static of the program's own crate, so its fields are read with one RIP-relative
/// load each, where a static of this crate costs a load of its address from the GOT first (rustc
/// does not assume another crate's statics are local to the executable). The copy is exact for the
/// only pointers `dealloc` may see, the ones the same value allocated (the `GlobalAlloc` contract):
/// it is written before the first sampled pointer leaves the value, and never changes afterwards
/// (the range is reserved once). The two words get a cache line of their own: every free in the
/// program reads them, and a neighbour that the linker happened to place beside the allocator
/// static (a counter some thread bumps on every request, say) would otherwise make each of those
/// reads a coherence miss.
///
/// Generic over its words only so that a loom model runs the same code with loom's atomics
/// (`base::sync`); the product's words are `std`'s.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct RangeCopy<W = AtomicUsize> {
    /// Length of the range, 0 until copied. Stored with Release after `base`; the filling check
    /// loads it with Acquire.
    len: W,
    /// Start of the range, [`NO_BASE`] until copied.
    base: W,
}

impl RangeCopy {
    /// Matches nothing.
    pub(crate) const fn new() -> RangeCopy {
        RangeCopy {
            len: AtomicUsize::new(0),
            base: AtomicUsize::new(NO_BASE),
        }
    }

    /// Copies the global words if not done yet. Called after every successful sample and before
    /// its pointer is returned, so by a thread that has seen the range reserved (it just
    /// allocated from it).
    #[inline]
    pub(crate) fn fill(&self) {
        self.fill_with(|| {
            // Ordering: see `reserved`; the caller allocated from the range, so both are set.
            let len = HOT.range_len.load(Ordering::Acquire);
            let base = HOT.range_base.load(Ordering::Relaxed);
            debug_assert!(len != 0 && base != NO_BASE);
            (len, base)
        });
    }
}

impl<W: Word<usize>> RangeCopy<W> {
    /// A copy over the model's own words, which must hold 0 and [`NO_BASE`].
    #[cfg(all(test, feature = "loom"))]
    fn from_words(len: W, base: W) -> RangeCopy<W> {
        RangeCopy { len, base }
    }

    /// True when `ptr` lies in the sampled arena's range (for a pointer this value allocated).
    /// The range is a power of two in size and aligned to it, so `ptr` is inside exactly when
    /// `ptr ^ base < len` (the xor clears the bits above the range's size only for pointers
    /// inside): two loads from one line, an xor and a compare.
    #[inline(always)]
    pub(crate) fn contains(&self, ptr: *const u8) -> bool {
        // Ordering: Relaxed is enough (and keeps the compiler free to keep values in registers
        // around the check). Both words are written once, and happen before any sampled pointer
        // leaves this value ([`RangeCopy::fill`]); a thread holding such a pointer got it through
        // a happens-before edge from the thread that returned it, so it reads both new values. A
        // thread that has no such edge may read any mix of old and new values: an old length (0)
        // matches nothing, and an old base (`NO_BASE`) matches nothing with any length, so a
        // pointer outside the range is never taken for a sampled one.
        let len = self.len.load(Ordering::Relaxed);
        // Ordering: see above.
        let base = self.base.load(Ordering::Relaxed);
        in_range(ptr as usize, base, len)
    }

    /// Copies `range()`'s `(len, base)` if not done yet ([`RangeCopy::fill`]).
    #[inline(always)]
    fn fill_with(&self, range: impl FnOnce() -> (usize, usize)) {
        // Ordering: Acquire pairs with the Release store of the length below, made by whichever
        // thread filled the copy: a thread that finds it filled by another and returns its own
        // sampled pointer has seen that thread's base too, and so does anyone it hands the pointer
        // to. (Several threads may fill at once; they all write the same two values.)
        if self.len.load(Ordering::Acquire) != 0 {
            return;
        }
        let (len, base) = range();
        // Ordering: the base first, then the length with Release (see above); `contains` says why
        // any mix a racing reader without a happens-before edge sees is still safe.
        self.base.store(base, Ordering::Relaxed);
        self.len.store(len, Ordering::Release);
    }
}

/// `addr` in `[base, base + len)`, for `len` a power of two (or 0) and `base` aligned to it.
#[inline(always)]
fn in_range(addr: usize, base: usize, len: usize) -> bool {
    (addr ^ base) < len
}

/// True once the range has been reserved (its size can no longer change).
pub(crate) fn reserved() -> bool {
    // Ordering: Acquire pairs with the Release store after the base, so a thread that sees the
    // length sees the base.
    HOT.range_len.load(Ordering::Acquire) != 0
}

/// Bytes of the range handed to jemalloc so far, and the range's size.
pub(crate) fn usage() -> (usize, usize) {
    // Ordering: statistics only.
    (
        BUMP.load(Ordering::Relaxed),
        HOT.range_len.load(Ordering::Acquire),
    )
}

/// jemalloc's index of the sampled arena, once it exists.
pub(crate) fn arena_index() -> Option<u32> {
    // Ordering: Acquire pairs with the Release store of READY in `create`, which publishes the
    // index.
    let ready = HOT.state.load(Ordering::Acquire) == READY;
    // Ordering: published by the state, above.
    ready.then(|| HOT.arena_index.load(Ordering::Relaxed) as u32)
}

/// Why the sampled arena could not serve a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unavailable {
    /// Reserving the range or creating the arena failed.
    NoArena,
}

/// The `mallocx` flags for a sampled object of alignment `align` and size `size`, creating the
/// arena on first use over a reserved range of `arena_size` bytes (rounded up to a power of two,
/// at least 4 MiB; ignored once the arena exists).
pub(crate) fn flags(size: usize, align: usize, arena_size: usize) -> Result<i32, Unavailable> {
    // Ordering: Acquire pairs with the Release store of READY in `create`, making ARENA_INDEX and
    // the range visible.
    let mut state = HOT.state.load(Ordering::Acquire);
    if state == UNINIT {
        state = create(arena_size);
    }
    if state != READY {
        return Err(Unavailable::NoArena);
    }
    // Ordering: published by the STATE pair above.
    let arena = HOT.arena_index.load(Ordering::Relaxed);
    Ok(jem::MALLOCX_ARENA(arena) | tcache_flag() | align_flags(size, align))
}

/// The `sdallocx` flags for a sampled object of alignment `align` and size `size`. jemalloc's
/// free path ignores `MALLOCX_ARENA` (the object's own metadata names its arena), so unlike
/// [`flags`] this reads nothing but the thread's tcache word: a free does not touch the arena's
/// shared line, which is cold by the time a sampled object dies.
///
/// Only for objects of the sampled arena, which therefore exists.
#[inline]
pub(crate) fn free_flags(size: usize, align: usize) -> i32 {
    tcache_flag() | align_flags(size, align)
}

// A thread's explicit tcache for sampled objects is kept in its thread state (`sampled_tcache`,
// the line the sampled path has in cache anyway): [`TCACHE_UNSET`] (the state's initial value) until the
// thread's first sampled allocation or free, [`TCACHE_OFF`] when it could not get one or its exit
// hook has destroyed it, else the tcache index + 1. `const`, no destructor: usable at any point of
// the thread's life.

/// No sampled tcache asked for yet: the thread state's initial value.
const TCACHE_UNSET: u32 = 0;
const TCACHE_OFF: u32 = u32::MAX;

/// Sets this thread's sampled tcache word; false when the thread-local is unavailable.
fn set_sampled_tcache(value: u32) -> bool {
    thread::with_thread(|t| t.sampled_tcache.set(value)).is_some()
}

/// The key whose destructor destroys a thread's sampled tcache (created under `INIT_LOCK`, before
/// the arena is published).
static TCACHE_KEY: ExitKey = ExitKey::new();

/// `MALLOCX_TCACHE(t)` for this thread's sampled tcache (creating it at first use), or
/// `MALLOCX_TCACHE_NONE` when the thread has none.
#[inline]
fn tcache_flag() -> i32 {
    match thread::with_thread(|t| t.sampled_tcache.get()) {
        Some(TCACHE_UNSET) => create_tcache(),
        Some(TCACHE_OFF) | None => jem::MALLOCX_TCACHE_NONE,
        Some(plus_one) => jem::MALLOCX_TCACHE((plus_one - 1) as usize),
    }
}

/// Creates this thread's sampled tcache and registers its destruction at thread exit.
#[cold]
#[inline(never)]
fn create_tcache() -> i32 {
    // Until this succeeds, or for good when it fails: no tcache.
    if !set_sampled_tcache(TCACHE_OFF) {
        return jem::MALLOCX_TCACHE_NONE;
    }
    let mut index: c_uint = 0;
    let mut index_len = std::mem::size_of::<c_uint>();
    // SAFETY: "tcache.create" writes an unsigned into `index`, whose size we state; it allocates
    // only from jemalloc's internal base allocator, never through the global allocator.
    let rc = unsafe {
        jem::mallctl(
            c"tcache.create".as_ptr(),
            (&mut index as *mut c_uint).cast(),
            &mut index_len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 || index >= TCACHE_OFF - 1 {
        return jem::MALLOCX_TCACHE_NONE;
    }
    // The key's value is index + 1 (never null), so its destructor runs at thread exit; it is a
    // number, not an address, hence no provenance.
    let value = NonNull::new(std::ptr::without_provenance_mut(index as usize + 1));
    if !value.is_some_and(|value| TCACHE_KEY.arm(value)) {
        destroy_tcache(index);
        return jem::MALLOCX_TCACHE_NONE;
    }
    set_sampled_tcache(index + 1);
    jem::MALLOCX_TCACHE(index as usize)
}

/// The key's destructor, run by glibc at thread exit (after Rust's thread-local destructors,
/// which may still free sampled objects through the tcache). From here on the thread uses no
/// tcache for sampled objects, so frees in later-running destructors of other keys (or of this
/// key's later rounds) go straight to the arena, and no tcache is created again.
extern "C" fn tcache_thread_exit(value: *mut c_void) {
    set_sampled_tcache(TCACHE_OFF);
    let plus_one = value as usize;
    if plus_one != 0 {
        destroy_tcache((plus_one - 1) as c_uint);
    }
}

/// Flushes a sampled tcache back to the sampled arena and releases its index.
fn destroy_tcache(index: c_uint) {
    let mut index = index;
    // SAFETY: "tcache.destroy" reads an unsigned naming a tcache that `tcache.create` returned
    // and that no thread uses any more (it was this thread's, and the thread has stopped using it).
    unsafe {
        jem::mallctl(
            c"tcache.destroy".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&mut index as *mut c_uint).cast(),
            std::mem::size_of::<c_uint>(),
        );
    }
}

/// Alignment flags exactly as tikv-jemallocator computes them: none when the natural alignment of
/// the size class suffices.
pub(crate) fn align_flags(size: usize, align: usize) -> i32 {
    const MIN_ALIGN: usize = 16;
    if align <= MIN_ALIGN && align <= size {
        0
    } else {
        jem::MALLOCX_LG_ALIGN(align.trailing_zeros() as usize)
    }
}

#[cold]
fn create(arena_size: usize) -> u8 {
    let _held = INIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // Ordering: under INIT_LOCK; Acquire as in `flags`.
    let state = HOT.state.load(Ordering::Acquire);
    if state != UNINIT {
        return state;
    }
    let state = match reserve_falling_back(arena_size).and_then(|()| create_arena()) {
        Ok(index) => {
            // Ordering: published by the Release store of STATE below.
            HOT.arena_index.store(index as usize, Ordering::Relaxed);
            pin_small_slabs(index);
            TCACHE_KEY.create(tcache_thread_exit);
            READY
        }
        Err(why) => {
            // Once: every later sample finds FAILED and is dropped (`arena_unavailable`).
            report_failure(arena_size, why);
            FAILED
        }
    };
    // Ordering: Release pairs with the Acquire loads in `flags`.
    HOT.state.store(state, Ordering::Release);
    state
}

/// The largest range the `arena_size` setting may ask for: 32 TiB, rounded up to a power of two
/// and reserved twice over for alignment, stays inside x86-64's 47-bit user address space.
pub(crate) const MAX_RANGE: usize = 1 << 45;

/// Why the sampled arena could not be created.
#[derive(Clone, Copy)]
enum CreateFailure {
    /// `mmap` of the reservation failed with this `errno` (0 when the size overflowed).
    Reserve(i32),
    /// `arenas.create` returned this error code.
    Arena(i32),
}

/// Says once on stderr that the sampled arena could not be created, so that profiling is never
/// silently off. Written with `write(2)` from a stack buffer: this runs inside the allocator.
fn report_failure(arena_size: usize, why: CreateFailure) {
    use std::io::Write;
    let mut buffer = [0u8; 320];
    let mut out = &mut buffer[..];
    let _ = match why {
        CreateFailure::Reserve(errno) => writeln!(
            out,
            "jeprof-shim: cannot reserve {arena_size} bytes of address space for the sampled \
             arena (mmap errno {errno}); no allocation will be sampled. Set \
             JEPROF_SHIM=arena_size:<smaller> (ulimit -v and valgrind limit it)"
        ),
        CreateFailure::Arena(rc) => writeln!(
            out,
            "jeprof-shim: jemalloc could not create the sampled arena (arenas.create returned \
             {rc}); no allocation will be sampled"
        ),
    };
    let len = 320 - out.len();
    // SAFETY: writes `len` initialised bytes of `buffer` to file descriptor 2; a failed write is
    // ignored (there is nowhere else to say it).
    unsafe {
        libc::write(2, buffer.as_ptr().cast(), len);
    }
}

/// Smallest range the fallback tries: the `arena_size` setting's own minimum.
const MIN_RANGE: usize = 4 << 20;

/// [`reserve_range`] of `arena_size`; when that is the default size and the address space will
/// not have it (valgrind's address-space manager, `ulimit -v`, small address spaces), halves the
/// size until a reservation succeeds or 4 MiB failed too, and says once on stderr what it got.
/// An `arena_size` the user chose is taken as asked or not at all (reported by the caller).
fn reserve_falling_back(arena_size: usize) -> Result<(), CreateFailure> {
    let first = reserve_range(arena_size);
    let Err(CreateFailure::Reserve(errno)) = first else {
        return first;
    };
    if arena_size != crate::base::settings::DEFAULT_ARENA_SIZE {
        return first;
    }
    let mut len = arena_size / 2;
    while len >= MIN_RANGE {
        if reserve_range(len).is_ok() {
            report_fallback(arena_size, len, errno);
            return Ok(());
        }
        len /= 2;
    }
    first
}

/// Says once on stderr that the default range could not be had and which size was reserved, so a
/// smaller arena (and the samples it may drop when full) never goes unnoticed.
fn report_fallback(wanted: usize, got: usize, errno: i32) {
    use std::io::Write;
    const CAP: usize = 400;
    let mut buffer = [0u8; CAP];
    let mut out = &mut buffer[..];
    let _ = writeln!(
        out,
        "jeprof-shim: could not reserve the default {} MiB of address space for the sampled \
         arena (mmap errno {errno}; ulimit -v and valgrind limit it); reserved {} MiB instead. \
         Samples that do not fit are dropped and counted (stats().dropped.arena_exhausted); set \
         JEPROF_SHIM=arena_size:<bytes> to choose the size",
        wanted >> 20,
        got >> 20,
    );
    let len = CAP - out.len();
    // SAFETY: writes `len` initialised bytes of `buffer` to file descriptor 2; a failed write is
    // ignored (there is nowhere else to say it).
    unsafe {
        libc::write(2, buffer.as_ptr().cast(), len);
    }
}

/// Reserves `len` (rounded up to a power of two, at least 4 MiB) bytes of address space, aligned
/// to its size.
fn reserve_range(len: usize) -> Result<(), CreateFailure> {
    let overflow = CreateFailure::Reserve(0);
    let len = len
        .max(MIN_RANGE)
        .checked_next_power_of_two()
        .ok_or(overflow)?;
    let span = len.checked_mul(2).ok_or(overflow)?;
    // SAFETY: an anonymous PROT_NONE reservation at an address of the kernel's choosing touches no
    // existing mapping.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(CreateFailure::Reserve(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    let raw = raw as usize;
    let base = (raw + len - 1) & !(len - 1);
    // SAFETY: both pieces lie inside the reservation we just made and nobody else uses: the part
    // before the aligned base and the part after base + len.
    unsafe {
        if base > raw {
            libc::munmap(raw as *mut libc::c_void, base - raw);
        }
        let end = base + len;
        if raw + span > end {
            libc::munmap(end as *mut libc::c_void, raw + span - end);
        }
    }
    // Ordering: the base is published by the Release store of the length right after.
    HOT.range_base.store(base, Ordering::Relaxed);
    // Ordering: Release pairs with the Acquire loads in `RangeCopy::fill`, `reserved`, `usage`
    // and the hooks.
    HOT.range_len.store(len, Ordering::Release);
    Ok(())
}

fn create_arena() -> Result<c_uint, CreateFailure> {
    let mut index: c_uint = 0;
    let mut index_len = std::mem::size_of::<c_uint>();
    let mut hooks: *mut jem::extent_hooks_t = HOOKS.0.get();
    // SAFETY: "arenas.create" reads an `extent_hooks_t *` (we pass a pointer to one, of the size we
    // state) and writes an unsigned into `index`; HOOKS lives for the whole program as jemalloc
    // requires.
    let rc = unsafe {
        jem::mallctl(
            c"arenas.create".as_ptr(),
            (&mut index as *mut c_uint).cast(),
            &mut index_len,
            (&mut hooks as *mut *mut jem::extent_hooks_t).cast(),
            std::mem::size_of::<*mut jem::extent_hooks_t>(),
        )
    };
    if rc == 0 {
        Ok(index)
    } else {
        Err(CreateFailure::Arena(rc))
    }
}

/// The most address space, in bytes, that the pinned slabs may take. A slab is a whole number
/// of jemalloc pages (`arenas.page`) holding whole objects, so its size follows the page: with
/// 4 KiB pages the small classes' slabs fit (the arena's fixed cost measured 553 KB) and all are
/// pinned; with 64 KiB pages (jemalloc's default on aarch64 Linux) pinning them all cost 8.78 MB,
/// and the budget keeps the fixed cost within 1 MiB by pinning the smallest classes, those
/// samples use most often, and leaving the rest (`bench/RESULTS.md`, sampled arena pages).
const PIN_BUDGET: usize = 768 << 10;

/// Allocates, and never frees, one object of each small size class in the sampled arena, the
/// smallest classes first, as long as their slabs fit in [`PIN_BUDGET`].
///
/// Sampled objects are sparse: at R = 512 KiB a size class often has no live sample at all, so
/// without this every sampled allocation would need a fresh slab (an extent split, heap and map
/// updates) and every free would hand it back, which measured about 2 µs per sample. A pinned
/// object keeps one slab per size class alive, and sampled objects share it. Cost: its slab's
/// address space (`arenas.bin.<i>.slab_size`), of which only the pinned objects' pages are
/// touched but all of which jemalloc counts active; a class left unpinned pays the 2 µs instead.
fn pin_small_slabs(arena: c_uint) {
    let flags = jem::MALLOCX_ARENA(arena as usize) | jem::MALLOCX_TCACHE_NONE;
    let (Some(bins), Some(size_mib), Some(slab_mib)) = (
        ctl_by_name::<c_uint>(c"arenas.nbins"),
        bin_mib(c"arenas.bin.0.size"),
        bin_mib(c"arenas.bin.0.slab_size"),
    ) else {
        return;
    };
    let mut pinned = 0usize;
    for bin in 0..bins as usize {
        let (Some(class), Some(slab)) = (
            ctl_of_bin::<usize>(size_mib, bin),
            ctl_of_bin::<usize>(slab_mib, bin),
        ) else {
            return;
        };
        if pinned + slab > PIN_BUDGET {
            continue;
        }
        // SAFETY: mallocx gets a non-zero size (a size class) and a valid arena; the object is
        // deliberately never freed.
        if !unsafe { jem::mallocx(class, flags) }.is_null() {
            pinned += slab;
        }
    }
}

/// The MIB of a per-bin control named for bin 0 (`arenas.bin.0.size`): its third component is
/// the bin.
fn bin_mib(name: &CStr) -> Option<[usize; 4]> {
    let mut mib = [0usize; 4];
    let mut len = mib.len();
    // SAFETY: `name` is NUL-terminated; jemalloc writes at most `len` components into `mib`.
    let rc = unsafe { jem::mallctlnametomib(name.as_ptr(), mib.as_mut_ptr(), &mut len) };
    (rc == 0 && len == mib.len()).then_some(mib)
}

/// Reads the jemalloc control `name`, of type `T` (its documented type). No allocation: this runs
/// while the arena is created, inside the first sample.
fn ctl_by_name<T: Copy + Default>(name: &CStr) -> Option<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `name` is NUL-terminated; jemalloc writes at most `len` bytes, the size of `value`,
    // whose type is the control's (the caller's contract).
    let rc = unsafe {
        jem::mallctl(
            name.as_ptr(),
            (&mut value as *mut T).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == std::mem::size_of::<T>()).then_some(value)
}

/// Reads the per-bin control of `mib` (from [`bin_mib`]) for `bin`, of type `T`, as
/// [`ctl_by_name`].
fn ctl_of_bin<T: Copy + Default>(mut mib: [usize; 4], bin: usize) -> Option<T> {
    mib[2] = bin;
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: a MIB of `mib.len()` components from `mallctlnametomib`; jemalloc writes at most
    // `len` bytes, the size of `value`, whose type is the control's (the caller's contract).
    let rc = unsafe {
        jem::mallctlbymib(
            mib.as_ptr(),
            mib.len(),
            (&mut value as *mut T).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == std::mem::size_of::<T>()).then_some(value)
}

/// The alloc hook: hands out the next aligned piece of the reserved range, made read-write.
///
/// # Safety
/// Called by jemalloc only, as an `extent_hooks_t::alloc` of the sampled arena: `zero` and
/// `commit` point to writable flags, and the range is reserved (it is, before the arena exists).
unsafe extern "C" fn extent_alloc(
    _hooks: *mut jem::extent_hooks_t,
    new_addr: *mut c_void,
    size: usize,
    alignment: usize,
    zero: *mut bool,
    commit: *mut bool,
    _arena: c_uint,
) -> *mut c_void {
    // Ordering: see `reserved`; the range is reserved before the arena (and so this hook) exists.
    let len = HOT.range_len.load(Ordering::Acquire);
    let base = HOT.range_base.load(Ordering::Relaxed);
    let alignment = alignment.max(1);
    // Ordering: the bump pointer only hands out disjoint offsets; no other memory hangs on it, so
    // Relaxed compare-exchange suffices (uniqueness comes from the RMW itself).
    let mut current = BUMP.load(Ordering::Relaxed);
    let start = loop {
        let start = if new_addr.is_null() {
            match (base + current).checked_add(alignment - 1) {
                Some(end) => (end & !(alignment - 1)) - base,
                None => return std::ptr::null_mut(),
            }
        } else if new_addr as usize == base + current
            && (new_addr as usize).is_multiple_of(alignment)
        {
            // In-place growth right at the end of what was handed out.
            current
        } else {
            return std::ptr::null_mut();
        };
        let end = match start.checked_add(size) {
            Some(end) if end <= len => end,
            // The range is exhausted: jemalloc sees an allocation failure.
            _ => return std::ptr::null_mut(),
        };
        // Ordering: see the comments above (Relaxed: the word is written once; the bump RMW alone makes offsets unique).
        match BUMP.compare_exchange_weak(current, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break start,
            Err(now) => current = now,
        }
    };
    let addr = (base + start) as *mut c_void;
    // SAFETY: [addr, addr+size) lies inside our reservation and was handed out to nobody else (the
    // compare-exchange above made it ours); making it read-write affects no other mapping.
    if unsafe { libc::mprotect(addr, size, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: jemalloc passes valid pointers to its two flags. The pages were never written
    // (PROT_NONE until now), so they read as zero, and they are committed (readable and writable).
    unsafe {
        *zero = true;
        *commit = true;
    }
    addr
}

/// Opt out of deallocation: the extent stays mapped and jemalloc retains it for reuse.
///
/// # Safety
/// None needed beyond the hook's signature: it reads none of its arguments.
unsafe extern "C" fn extent_dalloc(
    _hooks: *mut jem::extent_hooks_t,
    _addr: *mut c_void,
    _size: usize,
    _committed: bool,
    _arena: c_uint,
) -> bool {
    true
}

/// `madvise(addr + offset, length, advice)` for the two purge hooks; true (jemalloc reads it as
/// "not purged") when it fails.
///
/// # Safety
/// `[addr + offset, addr + offset + length)` must be pages of an extent that our alloc hook handed
/// out, with nothing of ours (or of anyone else) left in them that `advice` may discard.
unsafe fn purge(addr: *mut c_void, offset: usize, length: usize, advice: libc::c_int) -> bool {
    // SAFETY: the caller's contract: the pages lie in the read-write part of our private anonymous
    // range, so `addr + offset` stays inside it, and discarding their contents harms nobody.
    unsafe { libc::madvise(addr.cast::<u8>().add(offset).cast(), length, advice) != 0 }
}

/// The lazy purge hook: `MADV_FREE`.
///
/// # Safety
/// Called by jemalloc only, for `[addr + offset, addr + offset + length)` within an extent that
/// [`extent_alloc`] handed out and whose contents jemalloc no longer needs.
unsafe extern "C" fn extent_purge_lazy(
    _hooks: *mut jem::extent_hooks_t,
    addr: *mut c_void,
    _size: usize,
    offset: usize,
    length: usize,
    _arena: c_uint,
) -> bool {
    // SAFETY: jemalloc only purges pages of extents it got from our alloc hook, which lie in the
    // read-write part of our private anonymous range; MADV_FREE on them discards contents only.
    unsafe { purge(addr, offset, length, libc::MADV_FREE) }
}

/// The forced purge hook: `MADV_DONTNEED`.
///
/// # Safety
/// As for [`extent_purge_lazy`].
unsafe extern "C" fn extent_purge_forced(
    _hooks: *mut jem::extent_hooks_t,
    addr: *mut c_void,
    _size: usize,
    offset: usize,
    length: usize,
    _arena: c_uint,
) -> bool {
    // SAFETY: as in `extent_purge_lazy`; MADV_DONTNEED makes the pages read as zero afterwards, as
    // a forced purge must.
    unsafe { purge(addr, offset, length, libc::MADV_DONTNEED) }
}

/// Splitting is always fine: the whole range is one mapping.
///
/// # Safety
/// None needed beyond the hook's signature: it reads none of its arguments.
unsafe extern "C" fn extent_split(
    _hooks: *mut jem::extent_hooks_t,
    _addr: *mut c_void,
    _size: usize,
    _size_a: usize,
    _size_b: usize,
    _committed: bool,
    _arena: c_uint,
) -> bool {
    false
}

/// Merging is always fine: adjacent extents of this arena lie in the same mapping.
///
/// # Safety
/// None needed beyond the hook's signature: it reads none of its arguments.
unsafe extern "C" fn extent_merge(
    _hooks: *mut jem::extent_hooks_t,
    _addr_a: *mut c_void,
    _size_a: usize,
    _addr_b: *mut c_void,
    _size_b: usize,
    _committed: bool,
    _arena: c_uint,
) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_copy_matches_nothing_until_filled_then_exactly_the_range() {
        let copy = RangeCopy::new();
        let local = 0u64;
        let heap = Box::new(0u64);
        let outside = [
            &local as *const u64 as usize,
            &*heap as *const u64 as usize,
            16,
        ];
        for addr in outside {
            assert!(!copy.contains(addr as *const u8), "{addr:#x}");
        }
        // Creates the arena (reserving the range) if no other test did.
        assert!(flags(64, 8, crate::base::settings::arena_size()).is_ok());
        let (_, len) = usage();
        // Ordering: the range was published before `flags` returned READY.
        let base = HOT.range_base.load(Ordering::Relaxed);
        assert!(!copy.contains(base as *const u8), "still empty before fill");
        copy.fill();
        for addr in [base, base + len / 2, base + len - 1] {
            assert!(copy.contains(addr as *const u8), "{addr:#x}");
        }
        for addr in outside.into_iter().chain([base - 1, base + len]) {
            assert!(!copy.contains(addr as *const u8), "{addr:#x}");
        }
    }

    #[test]
    fn a_new_threads_sampled_tcache_word_reads_unset() {
        let word = std::thread::spawn(|| thread::with_thread(|t| t.sampled_tcache.get()))
            .join()
            .unwrap();
        assert_eq!(word, Some(TCACHE_UNSET));
    }

    #[test]
    fn the_range_check_is_exact_and_never_matches_with_a_torn_read() {
        let (base, len) = (0x7f00_0000_0000usize, 64usize << 30);
        for addr in [base, base + 1, base + len - 1] {
            assert!(in_range(addr, base, len), "{addr:#x}");
        }
        for addr in [0, 16, base - 1, base + len, base + 2 * len, usize::MAX >> 1] {
            assert!(!in_range(addr, base, len), "{addr:#x}");
        }
        // Before the range exists, and read half-way through its publication: no user-space
        // address (below 2^63) matches, whatever the length read.
        for addr in [0, 16, base, 0x5555_5555_0000, (1 << 47) - 16, (1 << 63) - 1] {
            for len in [0, 4 << 20, 64 << 30, 1 << 62] {
                assert!(!in_range(addr, NO_BASE, len), "{addr:#x} {len:#x}");
            }
            assert!(!in_range(addr, base, 0), "{addr:#x}");
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::{RangeCopy, NO_BASE};
    use crate::base::sync::loom_types::{model, thread, Arc, AtomicUsize};

    /// Two threads each return a sampled pointer and fill the range copy first: whichever finds
    /// the copy already filled by the other must see the other's base, so that its `dealloc`
    /// (here: `contains` on its own pointer) recognises the pointer. With the length stored or
    /// checked Relaxed, a thread could see the length and the old base, and send a sampled
    /// pointer to the inner allocator.
    #[test]
    fn loom_a_thread_that_finds_the_range_copy_filled_sees_its_base() {
        const LEN: usize = 4 << 20;
        const BASE: usize = 0x7f00_0000_0000;
        model(|| {
            let copy = Arc::new(RangeCopy::from_words(
                AtomicUsize::new(0),
                AtomicUsize::new(NO_BASE),
            ));
            let other = {
                let copy = copy.clone();
                thread::spawn(move || {
                    copy.fill_with(|| (LEN, BASE));
                    assert!(copy.contains((BASE + 16) as *const u8));
                })
            };
            copy.fill_with(|| (LEN, BASE));
            assert!(copy.contains((BASE + LEN - 16) as *const u8));
            // Never a pointer outside the range, whatever mix of words a thread reads.
            assert!(!copy.contains((BASE + LEN) as *const u8));
            other.join().unwrap();
        });
    }
}
