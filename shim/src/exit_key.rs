//! A `pthread_key_t` used only for its destructor: the way the profiler runs code when a thread
//! exits, after Rust's thread-local destructors (which may still allocate and free), without a
//! destructor on any thread-local of its own.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A key created once, whose destructor glibc calls at the exit of every thread that armed it.
pub(crate) struct ExitKey {
    key: AtomicUsize,
    /// Whether `key` exists. Stored with Release after `key`; read with Acquire.
    ready: AtomicBool,
}

impl ExitKey {
    pub(crate) const fn new() -> ExitKey {
        ExitKey {
            key: AtomicUsize::new(0),
            ready: AtomicBool::new(false),
        }
    }

    /// Creates the key with `destructor` (once; a failure leaves the key unusable, and
    /// [`ExitKey::arm`] then says so).
    pub(crate) fn create(&self, destructor: extern "C" fn(*mut c_void)) {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `key` is writable; the destructor is an `extern "C" fn` that lives for the
        // whole program.
        if unsafe { libc::pthread_key_create(&mut key, Some(destructor)) } == 0 {
            // Ordering: published by the Release store of `ready` right after.
            self.key.store(key as usize, Ordering::Relaxed);
            // Ordering: Release pairs with the Acquire load in `arm`.
            self.ready.store(true, Ordering::Release);
        }
    }

    /// Makes the destructor run with `value` (non-zero) when this thread exits; false when the
    /// key does not exist or glibc refused.
    pub(crate) fn arm(&self, value: usize) -> bool {
        debug_assert_ne!(value, 0);
        // Ordering: Acquire pairs with the Release store in `create`.
        if !self.ready.load(Ordering::Acquire) {
            return false;
        }
        // Ordering: published by `ready` above.
        let key = self.key.load(Ordering::Relaxed) as libc::pthread_key_t;
        // SAFETY: the key exists and is never deleted; setspecific stores a plain word for this
        // thread.
        unsafe { libc::pthread_setspecific(key, value as *const c_void) == 0 }
    }
}
