//! Small synchronisation primitives: the lock helper, the background threads' [`Wake`], cache-line
//! padding, the thread-exit key, and the two traits that let the publication protocols run under
//! loom.
//!
//! The protocols that are not trivial (the sampled range's publication to `dealloc`, the exit
//! key's, and the handover of a thread's table) are written once, generic over [`Word`] and
//! [`Lock`]. The product instantiates them with `std`'s atomics and mutexes (their `const`
//! constructors initialise the statics); the loom models (feature `loom`) instantiate the same code
//! with loom's, which [`loom_types`] re-exports.

use std::ffi::c_void;
use std::ops::DerefMut;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Locks a profiler mutex, ignoring poison (nothing here panics while holding one, and a heap
/// profiler must keep working regardless). `std`'s mutex is futex-based on Linux: it never
/// allocates, so it may sit under the allocator.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a background thread (the leak recorder, the OTLP pusher) sleeps on between its rounds: a
/// futex word that [`Wake::wake`] moves when a setting changes, so the thread reads its settings
/// again at once instead of after its current wait. No lock: a fork never inherits it held.
pub(crate) struct Wake(AtomicU32);

impl Wake {
    pub(crate) const fn new() -> Wake {
        Wake(AtomicU32::new(0))
    }

    /// The word now: read it before the settings, then [`Wake::wait`] with it, so that a change
    /// made after the read ends the wait.
    pub(crate) fn seen(&self) -> u32 {
        // Ordering: Acquire pairs with the Release in `wake`: a thread that sees the new word
        // sees the settings stored before it.
        self.0.load(Ordering::Acquire)
    }

    /// Moves the word and wakes the sleeping thread.
    pub(crate) fn wake(&self) {
        // Ordering: Release pairs with the Acquire in `seen`; the futex only needs the word to
        // have changed.
        self.0.fetch_add(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE on a valid, aligned u32 that lives as long as `self`; it reads no
        // other memory and neither allocates nor blocks.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }

    /// Sleeps for `timeout` unless the word moves past `seen` (or has already).
    pub(crate) fn wait(&self, seen: u32, timeout: Duration) {
        let timespec = libc::timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT on a valid, aligned u32 that lives as long as `self`, with a
        // timespec alive for the call; it sleeps only while the word is still `seen` and returns
        // on a wake, the timeout, a signal or spuriously, all of which the callers' loops handle.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                &timespec as *const libc::timespec,
            );
        }
    }
}

/// A value alone in its cache line(s), so that threads writing neighbouring values do not keep
/// taking the line from each other (false sharing).
#[repr(align(64))]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// An atomic word as the modelled protocols use it: `std`'s in the product, loom's in a model.
pub(crate) trait Word<T> {
    /// The atomic's `load`.
    fn load(&self, order: Ordering) -> T;
    /// The atomic's `store`.
    fn store(&self, value: T, order: Ordering);
}

impl Word<usize> for AtomicUsize {
    #[inline(always)]
    fn load(&self, order: Ordering) -> usize {
        AtomicUsize::load(self, order)
    }
    #[inline(always)]
    fn store(&self, value: usize, order: Ordering) {
        AtomicUsize::store(self, value, order)
    }
}

impl Word<bool> for AtomicBool {
    #[inline(always)]
    fn load(&self, order: Ordering) -> bool {
        AtomicBool::load(self, order)
    }
    #[inline(always)]
    fn store(&self, value: bool, order: Ordering) {
        AtomicBool::store(self, value, order)
    }
}

/// A mutex as the modelled protocols use it: `std`'s in the product (poison ignored, see
/// [`lock`]), loom's in a model.
pub(crate) trait Lock {
    /// What the mutex protects.
    type Data;
    /// Its guard.
    type Guard<'a>: DerefMut<Target = Self::Data>
    where
        Self: 'a;
    /// Locks it.
    fn lock(&self) -> Self::Guard<'_>;
}

impl<T> Lock for Mutex<T> {
    type Data = T;
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;
    fn lock(&self) -> MutexGuard<'_, T> {
        lock(self)
    }
}

/// A word published once: [`Published::set`] writes the word, then a flag with Release;
/// [`Published::get`] reads the flag with Acquire, then the word, so whoever sees the flag sees
/// the word. (A word with a reserved "unset" value would need no flag, but the exit key's word, a
/// `pthread_key_t`, may be any value, 0 included.)
pub(crate) struct Published<W = AtomicUsize, F = AtomicBool> {
    word: W,
    /// Stored with Release after `word`; loaded with Acquire.
    ready: F,
}

impl Published {
    /// Unset.
    pub(crate) const fn new() -> Published {
        Published {
            word: AtomicUsize::new(0),
            ready: AtomicBool::new(false),
        }
    }
}

impl<W: Word<usize>, F: Word<bool>> Published<W, F> {
    /// Unset, from the model's own atomics (initialised to 0 and false).
    #[cfg(all(test, feature = "loom"))]
    pub(crate) fn from_words(word: W, ready: F) -> Published<W, F> {
        Published { word, ready }
    }

    /// Publishes `value` (once: a second call would race readers).
    pub(crate) fn set(&self, value: usize) {
        // Ordering: published by the Release store of `ready` right after.
        self.word.store(value, Ordering::Relaxed);
        // Ordering: Release pairs with the Acquire load in `get`.
        self.ready.store(true, Ordering::Release);
    }

    /// The published value, if [`Published::set`] ran (as far as this thread can tell).
    pub(crate) fn get(&self) -> Option<usize> {
        // Ordering: Acquire pairs with the Release store in `set`.
        if !self.ready.load(Ordering::Acquire) {
            return None;
        }
        // Ordering: published by `ready` above.
        Some(self.word.load(Ordering::Relaxed))
    }
}

/// A `pthread_key_t` used only for its destructor: the way the profiler runs code when a thread
/// exits, after Rust's thread-local destructors (which may still allocate and free), without a
/// destructor on any thread-local of its own. Created once, by whichever thread initialises its
/// user; armed by any thread.
pub(crate) struct ExitKey {
    key: Published,
}

impl ExitKey {
    pub(crate) const fn new() -> ExitKey {
        ExitKey {
            key: Published::new(),
        }
    }

    /// Creates the key with `destructor` (once; a failure leaves the key unusable, and
    /// [`ExitKey::arm`] then says so).
    pub(crate) fn create(&self, destructor: extern "C" fn(*mut c_void)) {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `key` is writable; the destructor is an `extern "C" fn` that lives for the
        // whole program.
        if unsafe { libc::pthread_key_create(&mut key, Some(destructor)) } == 0 {
            self.key.set(key as usize);
        }
    }

    /// Makes the destructor run with `value` when this thread exits; false when the key does not
    /// exist or glibc refused.
    pub(crate) fn arm(&self, value: NonNull<c_void>) -> bool {
        let Some(key) = self.key.get() else {
            return false;
        };
        // SAFETY: the key exists and is never deleted; setspecific stores a plain word for this
        // thread.
        unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, value.as_ptr()) == 0 }
    }
}

/// loom's versions of the types above, for the models.
#[cfg(all(test, feature = "loom"))]
pub(crate) mod loom_types {
    pub(crate) use ::loom::sync::atomic::{AtomicBool, AtomicUsize};
    pub(crate) use ::loom::sync::{Arc, Mutex};
    pub(crate) use ::loom::{model, thread};

    use std::sync::atomic::Ordering;

    impl super::Word<usize> for AtomicUsize {
        fn load(&self, order: Ordering) -> usize {
            AtomicUsize::load(self, order)
        }
        fn store(&self, value: usize, order: Ordering) {
            AtomicUsize::store(self, value, order)
        }
    }

    impl super::Word<bool> for AtomicBool {
        fn load(&self, order: Ordering) -> bool {
            AtomicBool::load(self, order)
        }
        fn store(&self, value: bool, order: Ordering) {
            AtomicBool::store(self, value, order)
        }
    }

    impl<T> super::Lock for Mutex<T> {
        type Data = T;
        type Guard<'a>
            = ::loom::sync::MutexGuard<'a, T>
        where
            T: 'a;
        fn lock(&self) -> ::loom::sync::MutexGuard<'_, T> {
            Mutex::lock(self).unwrap()
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::loom_types::{thread, Arc, AtomicBool, AtomicUsize};
    use super::Published;

    /// Whoever sees the exit key published sees the key itself, not the word's initial 0 (with
    /// a Relaxed flag, a thread could arm key 0: another user's key, or none).
    #[test]
    fn loom_a_thread_that_sees_the_key_published_sees_the_key() {
        const KEY: usize = 7;
        super::loom_types::model(|| {
            let key = Arc::new(Published::from_words(
                AtomicUsize::new(0),
                AtomicBool::new(false),
            ));
            let reader = {
                let key = key.clone();
                thread::spawn(move || key.get())
            };
            key.set(KEY);
            assert_eq!(key.get(), Some(KEY), "the publishing thread");
            let seen = reader.join().unwrap();
            assert!(seen.is_none() || seen == Some(KEY), "{seen:?}");
        });
    }
}
