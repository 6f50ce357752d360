//! The C allocator entry: the malloc family's semantics over the profiler's sampler, sampled
//! arena, stacks and dumps, for a library that *replaces* a program's `malloc` (the
//! `jeprof-preload` crate's `libjeprof_preload.so`; `docs/design.md` §16).
//!
//! [`crate::Profiled`] is a `GlobalAlloc`: every free comes with the block's size and alignment.
//! C's `free(p)` and `realloc(p, n)` do not say either, so this entry finds them itself: the
//! sampled arena's range compare says whether `p` was sampled; a sampled block is forgotten by its
//! address (the live-sample record) and freed with jemalloc's unsized `dallocx`; any other block is
//! jemalloc's, which knows its size. Everything unsampled goes to jemalloc's own C entry points
//! (`_rjem_malloc` and friends: tikv-jemalloc-sys prefixes them, so they never clash with the
//! names a preload library exports), which keep their C semantics (`errno`, `malloc(0)`).
//!
//! The fast path is the same as `Profiled`'s: one thread-local subtract and a branch, then
//! jemalloc. The caller says where the thread-local is ([`Countdown`]): a shared library's Rust
//! thread-locals are reached through the loader's `__tls_get_addr` (stable Rust gives a cdylib
//! the general-dynamic TLS model), so the preload library keeps the countdown in an initial-exec
//! thread-local of its own, and the profiler's slow path works on that word. `free` and
//! `malloc_usable_size` read no thread-local: the range compare, then jemalloc's own call. A
//! sampled allocation goes through the very path `Profiled` takes
//! (`sampled_path::alloc_sampled`), so stacks, tables, dumps, settings, automatic dumps and the
//! HTTP listener are the profiler's own.
//!
//! What the functions do differently from `GlobalAlloc` is C's: `calloc` and `reallocarray`
//! check their multiplication, `realloc(NULL, n)` is `malloc(n)`, `realloc(p, 0)` frees `p` and
//! returns NULL (glibc's behaviour), failures set `errno` to `ENOMEM`, `posix_memalign` and
//! `aligned_alloc` refuse alignments that are not powers of two with `EINVAL`, `memalign` rounds
//! them up (as glibc does).
//!
//! Before `main`, in exiting threads and after thread-local destruction every function works:
//! the profiler's thread state is a `const` thread-local without destructor, initialisation is
//! lazy (the first allocation's slow path reads `JEPROF_SHIM`), and where the state cannot be had
//! the allocation takes the unsampled path.
//!
//! A request no sampled block can serve (a size beyond `isize::MAX`, or one the sampled arena
//! cannot map) takes the unsampled path too, and fails there with C's `ENOMEM` if jemalloc cannot
//! serve it either; the sampled arena's refusal is counted as a dropped sample.

use std::alloc::Layout;
use std::ffi::{c_int, c_void};

use tikv_jemalloc_sys as jem;

use crate::base::thread;
use crate::parts::{sampled_arena, sampler};
use crate::profiler::{allocator, init, sampled_path};

/// Where the calling thread's sample countdown lives, for the C entry's fast path.
///
/// # Safety
/// [`Countdown::word`] returns, on every thread, that thread's countdown: aligned, valid for the
/// thread's life (no destructor, so also before `main` and in exiting threads), zero before the
/// thread's first allocation, and read or written by that thread only. [`Countdown::expired`]
/// subtracts `size` from that word (wrapping) and says whether the subtraction borrowed.
pub unsafe trait Countdown {
    /// Subtracts `size` from the calling thread's countdown; true when it has run out (then the
    /// allocation takes the slow path, which redraws the countdown).
    fn expired(size: usize) -> bool;

    /// The calling thread's countdown word.
    fn word() -> *mut u64;
}

/// `ptr`, after a compiler fence. The slow paths are `extern "C"` so that they cannot unwind: a
/// call to one needs no landing pad, and the exported function sets up no frame on its fast path
/// (with a landing pad, every call paid a push and a pop). The fence after the call keeps it from
/// becoming a tail call: the exported function's frame must be on the stack while the slow path
/// captures it, as the sampled stacks start there (`malloc`, `calloc`, … by name).
#[inline(always)]
fn framed(ptr: *mut c_void) -> *mut c_void {
    // Ordering: pairs with nothing; only the fence's place after the call matters.
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    ptr
}

/// Makes `C`'s word the countdown the profiler's slow path, guards and restarts work on (once
/// per slow path: a relaxed store of the same pointer).
#[inline]
fn enter_slow_path<C: Countdown>() {
    // SAFETY: `C`'s contract is `count_down_in`'s; a process has one C entry, so every call
    // passes the same function.
    unsafe { thread::count_down_in(C::word) };
}

/// The sampled range as the C entry knows it: filled before the first sampled block is returned
/// (see [`sampled_arena::RangeCopy`]), so [`free`] recognises every sampled block.
static RANGE: sampled_arena::RangeCopy = sampled_arena::RangeCopy::new();

/// What a slow-path allocation falls back to when it is not sampled: the C entry point of
/// jemalloc that has the caller's semantics.
#[derive(Clone, Copy)]
#[repr(C)]
enum Plain {
    Malloc,
    Calloc,
    /// `aligned_alloc` with this power-of-two alignment.
    Aligned(usize),
}

impl Plain {
    /// The unsampled allocation of `size` bytes.
    ///
    /// # Safety
    /// None beyond jemalloc's own: any size is accepted (0 included), the alignment of `Aligned`
    /// is a power of two.
    unsafe fn alloc(self, size: usize) -> *mut c_void {
        // SAFETY: jemalloc's C entry points accept any size; `Aligned` carries a power of two.
        unsafe {
            match self {
                Plain::Malloc => jem::malloc(size),
                Plain::Calloc => jem::calloc(1, size),
                Plain::Aligned(align) => jem::aligned_alloc(align, size),
            }
        }
    }

    fn align(self) -> usize {
        match self {
            // The size class's natural alignment, which is what jemalloc's malloc gives.
            Plain::Malloc | Plain::Calloc => 1,
            Plain::Aligned(align) => align,
        }
    }
}

/// Sets the calling thread's `errno`.
fn set_errno(value: c_int) {
    // SAFETY: __errno_location returns this thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = value };
}

/// The allocation path once the countdown expired: a sample through the profiler's sampled path,
/// else (sampling off, the sample dropped, a size no layout can have) the plain allocation.
///
/// # Safety
/// `plain`'s alignment, if any, is a power of two.
#[cold]
#[inline(never)]
unsafe extern "C" fn alloc_slow<C: Countdown>(size: usize, plain: Plain) -> *mut c_void {
    // The unwinders skip this frame and the ones it calls: stacks start in the caller's frame.
    let marker = 0u8;
    let marker = std::hint::black_box(&marker) as *const u8 as usize;
    enter_slow_path::<C>();
    allocator::note_jemalloc();
    if size != 0 {
        if let Some(period) = sampler::on_countdown_expired(size, init::ensure_init) {
            if let Ok(layout) = Layout::from_size_align(size, plain.align()) {
                let zeroed = matches!(plain, Plain::Calloc);
                // SAFETY: layout has a non-zero size; marker is a local of this frame.
                let sampled =
                    unsafe { sampled_path::alloc_sampled(layout, zeroed, period, marker) };
                if let Some(ptr) = sampled {
                    RANGE.fill();
                    return ptr.cast();
                }
            }
        }
    }
    // SAFETY: forwarded contract.
    unsafe { plain.alloc(size) }
}

/// `malloc(size)`: at least `size` bytes aligned for any object (`malloc(0)` returns a unique
/// pointer), or NULL with `errno = ENOMEM`.
///
/// # Safety
/// None beyond C's: the result is freed once, by [`free`] or [`realloc`] of this module (it is
/// jemalloc's or the sampled arena's block).
#[inline(always)]
pub unsafe fn malloc<C: Countdown>(size: usize) -> *mut c_void {
    if C::expired(size) {
        // SAFETY: Malloc has no alignment.
        return framed(unsafe { alloc_slow::<C>(size, Plain::Malloc) });
    }
    // SAFETY: jemalloc's malloc accepts any size and sets errno on failure.
    unsafe { jem::malloc(size) }
}

/// `calloc(count, size)`: `count * size` zeroed bytes, or NULL with `errno = ENOMEM` when the
/// product overflows or memory is short.
///
/// # Safety
/// As for [`malloc`].
#[inline(always)]
pub unsafe fn calloc<C: Countdown>(count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    };
    if C::expired(total) {
        // SAFETY: Calloc has no alignment.
        return framed(unsafe { alloc_slow::<C>(total, Plain::Calloc) });
    }
    // SAFETY: jemalloc's calloc zeroes and sets errno on failure.
    unsafe { jem::calloc(1, total) }
}

/// `aligned_alloc(align, size)`, the core of the aligned family: NULL with `errno = ENOMEM` on
/// failure.
///
/// # Safety
/// `align` is a power of two; as for [`malloc`] otherwise.
#[inline(always)]
unsafe fn alloc_aligned<C: Countdown>(align: usize, size: usize) -> *mut c_void {
    if C::expired(size) {
        // SAFETY: align is a power of two (caller contract).
        return framed(unsafe { alloc_slow::<C>(size, Plain::Aligned(align)) });
    }
    // SAFETY: align is a power of two (caller contract).
    unsafe { jem::aligned_alloc(align, size) }
}

/// C11's `aligned_alloc(align, size)`: NULL with `errno = EINVAL` when `align` is not a power of
/// two (glibc's rule), with `ENOMEM` when memory is short.
///
/// # Safety
/// As for [`malloc`].
#[inline]
pub unsafe fn aligned_alloc<C: Countdown>(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    // SAFETY: align is a power of two.
    unsafe { alloc_aligned::<C>(align, size) }
}

/// `memalign(align, size)`: an alignment that is not a power of two is rounded up to one (glibc's
/// behaviour); NULL with `errno = EINVAL` when none fits, `ENOMEM` when memory is short.
///
/// # Safety
/// As for [`malloc`].
#[inline]
pub unsafe fn memalign<C: Countdown>(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.max(1).checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    // SAFETY: align is a power of two.
    unsafe { alloc_aligned::<C>(align, size) }
}

/// `posix_memalign(out, align, size)`: 0 and the block in `*out`; `EINVAL` when `align` is not a
/// power of two multiple of `sizeof(void *)`, `ENOMEM` when memory is short (`*out` untouched
/// then, `errno` too).
///
/// # Safety
/// `out` is valid for a pointer write; as for [`malloc`] otherwise.
#[inline]
pub unsafe fn posix_memalign<C: Countdown>(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    // SAFETY: __errno_location returns this thread's errno.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: align is a power of two.
    let ptr = unsafe { alloc_aligned::<C>(align, size) };
    if ptr.is_null() {
        set_errno(saved);
        return libc::ENOMEM;
    }
    // SAFETY: out is valid for a write (caller contract).
    unsafe { *out = ptr };
    0
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// `valloc(size)`: page-aligned.
///
/// # Safety
/// As for [`malloc`].
#[inline]
pub unsafe fn valloc<C: Countdown>(size: usize) -> *mut c_void {
    // SAFETY: the page size is a power of two.
    unsafe { alloc_aligned::<C>(page_size(), size) }
}

/// `pvalloc(size)`: page-aligned, the size rounded up to whole pages (one page for 0); NULL with
/// `errno = ENOMEM` when the rounding overflows.
///
/// # Safety
/// As for [`malloc`].
#[inline]
pub unsafe fn pvalloc<C: Countdown>(size: usize) -> *mut c_void {
    let page = page_size();
    let Some(rounded) = size.max(1).checked_next_multiple_of(page) else {
        set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    };
    // SAFETY: the page size is a power of two.
    unsafe { alloc_aligned::<C>(page, rounded) }
}

/// `free(ptr)`: NULL is a no-op; a sampled block is forgotten by the profile and returned to the
/// sampled arena, any other to jemalloc.
///
/// # Safety
/// `ptr` is NULL or a live block from this module's allocation functions, freed once.
#[inline(always)]
pub unsafe fn free(ptr: *mut c_void) {
    if RANGE.contains(ptr.cast()) {
        // SAFETY: ptr lies in the sampled arena, so this module's slow path allocated it there.
        return unsafe { free_sampled(ptr) };
    }
    // SAFETY: ptr is NULL or jemalloc's (caller contract; not the sampled arena's).
    unsafe { jem::free(ptr) }
}

/// A sampled block's free: forgotten by the profile, returned to the sampled arena.
///
/// # Safety
/// `ptr` is a live block of the sampled arena, freed once.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_sampled(ptr: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { sampled_path::free_sampled_unsized(ptr.cast()) }
}

/// `realloc(ptr, size)`: `malloc(size)` for a NULL `ptr`; frees `ptr` and returns NULL for size 0
/// (glibc's behaviour); else a block of `size` bytes holding `ptr`'s contents (up to the smaller
/// size), which may be `ptr` itself. On failure NULL with `errno = ENOMEM`, and `ptr` untouched.
/// The new size passes the sampler's countdown as any allocation does.
///
/// # Safety
/// As for [`free`] for `ptr`.
#[inline(always)]
pub unsafe fn realloc<C: Countdown>(ptr: *mut c_void, size: usize) -> *mut c_void {
    if size == 0 {
        // SAFETY: forwarded contract.
        return unsafe { realloc_to_zero::<C>(ptr) };
    }
    let expired = C::expired(size);
    if !expired && !RANGE.contains(ptr.cast()) {
        // SAFETY: ptr is NULL (jemalloc's realloc is then its malloc) or jemalloc's (not
        // sampled); size is non-zero.
        return unsafe { jem::realloc(ptr, size) };
    }
    // SAFETY: forwarded contract.
    framed(unsafe { realloc_slow::<C>(ptr, size, expired) })
}

/// `realloc(ptr, 0)`: `malloc(0)` for a NULL `ptr`, else frees `ptr` and returns NULL.
///
/// # Safety
/// As for [`realloc`].
#[cold]
#[inline(never)]
unsafe extern "C" fn realloc_to_zero<C: Countdown>(ptr: *mut c_void) -> *mut c_void {
    if ptr.is_null() {
        // SAFETY: as for malloc.
        return unsafe { malloc::<C>(0) };
    }
    // SAFETY: forwarded contract.
    unsafe { free(ptr) };
    std::ptr::null_mut()
}

/// The reallocation path once the countdown expired or `ptr` was sampled: a new block (a sample
/// if the countdown says so), the contents copied, the old block freed (for a NULL `ptr`, only
/// the new block).
///
/// # Safety
/// As for [`realloc`]; `size` is not 0.
#[cold]
#[inline(never)]
unsafe extern "C" fn realloc_slow<C: Countdown>(
    ptr: *mut c_void,
    size: usize,
    expired: bool,
) -> *mut c_void {
    let marker = 0u8;
    let marker = std::hint::black_box(&marker) as *const u8 as usize;
    enter_slow_path::<C>();
    allocator::note_jemalloc();
    let period = if expired {
        sampler::on_countdown_expired(size, init::ensure_init)
    } else {
        None
    };
    if period.is_none() && !RANGE.contains(ptr.cast()) {
        // SAFETY: ptr is NULL or jemalloc's (not sampled); size is non-zero.
        return unsafe { jem::realloc(ptr, size) };
    }
    let sampled = period.and_then(|period| {
        let layout = Layout::from_size_align(size, 1).ok()?;
        // SAFETY: layout has a non-zero size; marker is a local of this frame.
        let ptr = unsafe { sampled_path::alloc_sampled(layout, false, period, marker) }?;
        RANGE.fill();
        Some(ptr.cast::<c_void>())
    });
    // SAFETY: jemalloc's malloc accepts any size and sets errno on failure.
    let new = sampled.unwrap_or_else(|| unsafe { jem::malloc(size) });
    if new.is_null() || ptr.is_null() {
        return new;
    }
    // SAFETY: ptr is a live block of this module (caller contract), so jemalloc knows its usable
    // size; both blocks are valid for the smaller size and do not overlap (new is fresh); ptr is
    // then freed once.
    unsafe {
        let old_size = jem::malloc_usable_size(ptr);
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), new.cast::<u8>(), old_size.min(size));
        free(ptr);
    }
    new
}

/// `reallocarray(ptr, count, size)`: [`realloc`] to `count * size` bytes, or NULL with
/// `errno = ENOMEM` (and `ptr` untouched) when the product overflows.
///
/// # Safety
/// As for [`realloc`].
#[inline]
pub unsafe fn reallocarray<C: Countdown>(
    ptr: *mut c_void,
    count: usize,
    size: usize,
) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    };
    // SAFETY: forwarded contract.
    unsafe { realloc::<C>(ptr, total) }
}

/// `malloc_usable_size(ptr)`: the bytes the block can hold (0 for NULL). jemalloc's answer, for
/// sampled blocks too (the sampled arena is one of its arenas): jemalloc's own call with nothing
/// before it (it answers 0 for NULL itself).
///
/// # Safety
/// `ptr` is NULL or a live block from this module's allocation functions.
#[inline(always)]
pub unsafe fn malloc_usable_size(ptr: *const c_void) -> usize {
    // SAFETY: ptr is NULL or a live jemalloc block (caller contract).
    unsafe { jem::malloc_usable_size(ptr) }
}
