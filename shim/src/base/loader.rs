//! The loader's two locks across `fork`: every walk of the loaded objects goes through
//! [`iterate_phdr`], and every libgcc unwind holds [`UNWIND_LOCK`]'s read side, so that `fork`
//! (which holds its write side, `profiler::hooks::fork_prepare`) never copies a thread that is
//! inside one of them.
//!
//! Why: glibc's `dl_iterate_phdr` holds the loader's lock (`dl_load_write_lock`) while it calls
//! back, and libgcc's unwinder holds its own lock around its frame tables. A child forked while
//! another thread holds either inherits it held, with no thread left to release it, and waits
//! forever the first time it takes it: at its first sample's unwind, or its first dump's build
//! ids. (Seen in `stress_fork` under gdb: the child in `__lll_lock_wait` inside
//! `dl_iterate_phdr`.) Holding the read side costs one uncontended atomic pair per walk; walks
//! happen at dumps, at the `.eh_frame` unwinder's captures that miss its rule cache, and at one
//! capture in 64 (its check that no object was unloaded), never on the allocation fast path.

use std::ffi::{c_int, c_void};
use std::sync::RwLock;

use super::thread::Guard;

/// Read-held around every libgcc unwind and every [`iterate_phdr`]; write-held across `fork`.
///
/// Never read-held twice on one thread: `std`'s lock makes a second reader wait behind a waiting
/// writer, so a nested read would deadlock against a `fork` in between. [`iterate_phdr`] enters
/// the re-entrancy [`Guard`], so no allocation in a callback is sampled (and unwound) while held.
pub(crate) static UNWIND_LOCK: RwLock<()> = RwLock::new(());

/// The callback type of `dl_iterate_phdr`.
pub(crate) type PhdrCallback =
    unsafe extern "C" fn(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int;

/// `dl_iterate_phdr(callback, data)` inside the re-entrancy guard and under [`UNWIND_LOCK`]'s
/// read side (module docs). Returns what `dl_iterate_phdr` returns: the last callback's value.
///
/// # Safety
/// As `dl_iterate_phdr`'s: `callback` may read the `dl_phdr_info` only during its call, and
/// `data` must be what `callback` expects. `callback` must not walk the loaded objects or unwind
/// with libgcc itself (the lock is not re-entrant, see [`UNWIND_LOCK`]).
pub(crate) unsafe fn iterate_phdr(callback: PhdrCallback, data: *mut c_void) -> c_int {
    let _guard = Guard::enter();
    let _held = UNWIND_LOCK.read().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the caller's contract.
    unsafe { libc::dl_iterate_phdr(Some(callback), data) }
}
