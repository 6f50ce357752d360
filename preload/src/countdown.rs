//! The thread's sample countdown, in initial-exec thread-local storage.
//!
//! Stable Rust gives a shared library's thread-locals the general-dynamic TLS model: every access
//! calls the loader's `__tls_get_addr` (a call and about ten instructions on each `malloc`).
//! The countdown is instead a C thread-local declared initial-exec (`src/countdown.c`, built by
//! `build.rs`), as jemalloc declares its own thread state (`JEMALLOC_TLS_MODEL`): the loader
//! writes the word's offset from the thread pointer into the GOT at load, and the fast path
//! reads that offset and subtracts from the word at the thread pointer plus it, inline. On
//! x86_64 that is three instructions (`mov` of the offset, `sub` into `fs:[offset]`, `jb`); on
//! aarch64 the same with the thread pointer from `tpidr_el0`; elsewhere a call to the C file's
//! accessor. The profiler's slow path reaches the same word through that accessor
//! ([`jeprof_shim::c_api::Countdown`]), so its guards and redraws act on it.
//!
//! Initial-exec needs the library's TLS in the static block: true for a library loaded with the
//! program (`LD_PRELOAD`), and for a `dlopen` within the loader's surplus, which jemalloc inside
//! the library already needs for its own initial-exec state.

use jeprof_shim::c_api::Countdown;

extern "C" {
    /// The calling thread's countdown word (`src/countdown.c`).
    fn jeprof_preload_countdown_word() -> *mut u64;
}

/// The countdown of `src/countdown.c`.
pub(crate) enum InitialExec {}

// SAFETY: the word is a C `__thread` variable without destructor, zero-initialised, aligned (a
// `uint64_t`), valid for its thread's life and never touched by another thread (nothing takes its
// address but this module and the profiler's slow path on the same thread); `expired` subtracts
// from that word and reports the borrow.
unsafe impl Countdown for InitialExec {
    #[inline(always)]
    fn expired(size: usize) -> bool {
        expired(size)
    }

    fn word() -> *mut u64 {
        // SAFETY: the accessor only takes the address of the calling thread's word.
        unsafe { jeprof_preload_countdown_word() }
    }
}

/// Subtracts `size` from the calling thread's countdown (wrapping); true when it borrowed.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn expired(size: usize) -> bool {
    let offset: usize;
    // SAFETY: reads the GOT slot the loader filled with the word's offset from the thread pointer
    // (an R_X86_64_TPOFF64 relocation, resolved at load; the slot never changes after).
    unsafe {
        std::arch::asm!(
            "mov {offset}, qword ptr [rip + jeprof_preload_countdown@GOTTPOFF]",
            offset = out(reg) offset,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    // SAFETY: `fs` is the thread pointer, so `fs:[offset]` is this thread's word, which only this
    // thread touches; the subtraction sets the carry flag exactly when it borrows.
    unsafe {
        std::arch::asm!(
            "sub qword ptr fs:[{offset}], {size}",
            "jb {expired}",
            offset = in(reg) offset,
            size = in(reg) size,
            expired = label { return true; },
            options(nostack),
        );
    }
    false
}

/// Subtracts `size` from the calling thread's countdown (wrapping); true when it borrowed.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn expired(size: usize) -> bool {
    let offset: usize;
    let thread_pointer: usize;
    // SAFETY: reads the GOT slot the loader filled with the word's offset from the thread pointer
    // (an R_AARCH64_TLS_TPREL64 relocation, resolved at load; the slot never changes after), and
    // the thread pointer register.
    unsafe {
        std::arch::asm!(
            "adrp {offset}, :gottprel:jeprof_preload_countdown",
            "ldr {offset}, [{offset}, :gottprel_lo12:jeprof_preload_countdown]",
            "mrs {thread_pointer}, tpidr_el0",
            offset = out(reg) offset,
            thread_pointer = out(reg) thread_pointer,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    let word = std::ptr::with_exposed_provenance_mut::<u64>(thread_pointer.wrapping_add(offset));
    // SAFETY: the thread pointer plus the word's offset is this thread's word (aligned, live for
    // the thread's life), which only this thread touches.
    unsafe {
        let (left, borrowed) = word.read().overflowing_sub(size as u64);
        word.write(left);
        borrowed
    }
}

/// Subtracts `size` from the calling thread's countdown (wrapping); true when it borrowed.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
fn expired(size: usize) -> bool {
    let word = InitialExec::word();
    // SAFETY: the accessor returns this thread's word (aligned, live for the thread's life),
    // which only this thread touches.
    unsafe {
        let (left, borrowed) = word.read().overflowing_sub(size as u64);
        word.write(left);
        borrowed
    }
}
