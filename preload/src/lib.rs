//! # libjeprof_preload.so: heap profiles of unmodified programs
//!
//! `LD_PRELOAD=libjeprof_preload.so JEPROF_SHIM=dump_on_exit:/tmp/heap.%p.prof program` replaces
//! the program's `malloc` family with jemalloc behind jeprof-shim's sampler: the same sampled
//! arena, stacks, dumps, settings, automatic dumps and HTTP listener as a Rust program built with
//! `jeprof_shim::Profiled` (one implementation: this library only exports the C names over
//! [`jeprof_shim::c_api`]). The manual is `preload/README.md`; the design, `docs/design.md` §16.
//!
//! The calls cost what jemalloc's own cost plus the sampler's few instructions: `malloc` and its
//! kin subtract from a countdown kept in initial-exec thread-local storage (not through
//! `__tls_get_addr`), `free` and `realloc` compare the pointer with the sampled range, and each
//! then calls jemalloc's function directly; `malloc_usable_size` is jemalloc's call alone.
//!
//! Exported, with glibc's semantics: `malloc`, `free`, `calloc`, `realloc`, `reallocarray`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc`, `malloc_usable_size`.
//! C++'s `operator new` and `operator delete` reach them through libstdc++.
//!
//! Also exported, forwarded to the same jemalloc: its introspection calls `mallctl`,
//! `mallctlnametomib`, `mallctlbymib`, `malloc_stats_print` and `nallocx`. A program linked
//! against a system jemalloc (Debian builds redis so) calls these by their plain names; without
//! them they would reach that other jemalloc, which holds none of the program's memory, and its
//! statistics (redis's `INFO memory`) would be nonsense.
//!
//! None of these functions unwinds into C: they are `extern "C"`, so a panic inside the profiler
//! aborts the process. The library's panic hook (its own: the library carries its own copy of
//! Rust's standard library, so the hook touches no Rust program it is preloaded into) says so in
//! one line, `jeprof-preload: internal error at <file>:<line>: <message>; aborting`, and aborts.

use std::ffi::{c_char, c_int, c_void};
use std::io::Write;

use jeprof_shim::c_api;

mod countdown;

use countdown::InitialExec;

/// The library's own Rust allocations (the profiler's tables, dumps, symbolization, the HTTP
/// listener) go to jemalloc directly: never through the exported `malloc`, so never sampled and
/// never re-entering the profiler.
#[global_allocator]
static LIBRARY_HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// C's `malloc`.
///
/// # Safety
/// C's contract: the block is freed at most once, by this library's `free` or `realloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::malloc::<InitialExec>(size) }
}

/// C's `free`.
///
/// # Safety
/// `ptr` is NULL or a live block of this library's allocation functions, freed once.
#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut c_void) {
    // SAFETY: forwarded C contract.
    unsafe { c_api::free(ptr) }
}

/// C's `calloc`.
///
/// # Safety
/// As for [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::calloc::<InitialExec>(count, size) }
}

/// C's `realloc` (glibc's: `realloc(p, 0)` frees `p` and returns NULL).
///
/// # Safety
/// As for [`free`] for `ptr`.
#[no_mangle]
pub unsafe extern "C" fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::realloc::<InitialExec>(ptr, size) }
}

/// glibc's `reallocarray`.
///
/// # Safety
/// As for [`free`] for `ptr`.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::reallocarray::<InitialExec>(ptr, count, size) }
}

/// POSIX's `posix_memalign`.
///
/// # Safety
/// `out` is valid for a pointer write; as for [`malloc`] otherwise.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    // SAFETY: forwarded C contract.
    unsafe { c_api::posix_memalign::<InitialExec>(out, align, size) }
}

/// C11's `aligned_alloc`.
///
/// # Safety
/// As for [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::aligned_alloc::<InitialExec>(align, size) }
}

/// The obsolete `memalign`.
///
/// # Safety
/// As for [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::memalign::<InitialExec>(align, size) }
}

/// The obsolete `valloc`.
///
/// # Safety
/// As for [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::valloc::<InitialExec>(size) }
}

/// The obsolete `pvalloc`.
///
/// # Safety
/// As for [`malloc`].
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    // SAFETY: forwarded C contract.
    unsafe { c_api::pvalloc::<InitialExec>(size) }
}

/// glibc's `malloc_usable_size`.
///
/// # Safety
/// `ptr` is NULL or a live block of this library's allocation functions.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(ptr: *mut c_void) -> usize {
    // SAFETY: forwarded C contract.
    unsafe { c_api::malloc_usable_size(ptr) }
}

/// jemalloc's `mallctl`, on the jemalloc that serves this library's blocks.
///
/// # Safety
/// jemalloc's contract: `name` is a NUL-terminated string; `oldp`/`oldlenp` and `newp`/`newlen`
/// describe buffers of the types the named control reads and writes, or are NULL.
#[no_mangle]
pub unsafe extern "C" fn mallctl(
    name: *const c_char,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    // SAFETY: forwarded C contract.
    unsafe { tikv_jemalloc_sys::mallctl(name, oldp, oldlenp, newp, newlen) }
}

/// jemalloc's `mallctlnametomib`.
///
/// # Safety
/// As for [`mallctl`]; `mibp` holds `*miblenp` entries.
#[no_mangle]
pub unsafe extern "C" fn mallctlnametomib(
    name: *const c_char,
    mibp: *mut usize,
    miblenp: *mut usize,
) -> c_int {
    // SAFETY: forwarded C contract.
    unsafe { tikv_jemalloc_sys::mallctlnametomib(name, mibp, miblenp) }
}

/// jemalloc's `mallctlbymib`.
///
/// # Safety
/// As for [`mallctl`]; `mib` holds `miblen` entries.
#[no_mangle]
pub unsafe extern "C" fn mallctlbymib(
    mib: *const usize,
    miblen: usize,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    // SAFETY: forwarded C contract.
    unsafe { tikv_jemalloc_sys::mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen) }
}

/// jemalloc's `malloc_stats_print`.
///
/// # Safety
/// `write_cb` is NULL or a callback safe to call with `cbopaque`; `opts` is NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn malloc_stats_print(
    write_cb: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
    cbopaque: *mut c_void,
    opts: *const c_char,
) {
    // SAFETY: forwarded C contract.
    unsafe { tikv_jemalloc_sys::malloc_stats_print(write_cb, cbopaque, opts) }
}

/// jemalloc's `nallocx`: the usable size a request of `size` bytes with `flags` would get.
///
/// # Safety
/// jemalloc's contract for `flags` (a valid `MALLOCX_*` combination).
#[no_mangle]
pub unsafe extern "C" fn nallocx(size: usize, flags: c_int) -> usize {
    // SAFETY: forwarded C contract.
    unsafe { tikv_jemalloc_sys::nallocx(size, flags) }
}

/// The one-line report of a panic inside the library, then `abort` (never an unwind into C).
fn report_and_abort(info: &std::panic::PanicHookInfo<'_>) {
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
        .unwrap_or("panic");
    let location = info
        .location()
        .map_or_else(|| "?".to_string(), |l| format!("{}:{}", l.file(), l.line()));
    let _ = writeln!(
        std::io::stderr(),
        "jeprof-preload: internal error at {location}: {message}; aborting"
    );
    std::process::abort();
}

extern "C" fn install_panic_hook() {
    std::panic::set_hook(Box::new(report_and_abort));
}

/// Installs the panic hook when the library is loaded (an ELF constructor: it runs before the
/// program's `main`; a panic before it aborts all the same, with Rust's default message).
#[used]
#[link_section = ".init_array"]
static INSTALL_PANIC_HOOK: extern "C" fn() = install_panic_hook;
