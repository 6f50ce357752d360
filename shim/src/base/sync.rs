//! Small synchronisation primitives: the lock helper, the sampled path's [`FutexMutex`], the
//! background threads' [`Wake`], cache-line padding, the thread-exit key, and the two traits that
//! let the publication protocols run under loom.
//!
//! The protocols that are not trivial (the sampled range's publication to `dealloc`, the exit
//! key's, and the handover of a thread's table) are written once, generic over [`Word`] and
//! [`Lock`]. The product instantiates them with `std`'s atomics and mutexes (their `const`
//! constructors initialise the statics); the loom models (feature `loom`) instantiate the same code
//! with loom's, which [`loom_types`] re-exports.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
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

/// The mutex of the tables every sample and every sampled free lock (the live-sample shards, the
/// per-thread tables, the peak tracker's per-stack sums): `std`'s futex mutex without poisoning.
///
/// A sample takes three of these and a sampled free two. `std::sync::Mutex` asks whether the
/// thread is panicking when it locks and again when it unlocks (the global panic count, loaded
/// through the GOT, tested, branched on: about ten instructions per lock and unlock), for a poison
/// flag that nothing here uses ([`lock`] ignores it). The protocol is `std`'s on Linux (Drepper's
/// "Futexes Are Tricky", mutex 2): the word is 0 unlocked, 1 locked, 2 locked and perhaps waited
/// for; a locker that finds it taken spins briefly, then sets 2 and sleeps on the futex while it
/// stays 2; an unlock that replaces a 2 wakes one sleeper. It never allocates, so it may sit
/// under the allocator, and after `fork` the child releases what `fork_prepare` took, as with
/// `std`'s (a wake-up with no sleeper is harmless).
#[repr(C)] // `state` first: the live-sample shards keep data in the lock's cache line.
pub(crate) struct FutexMutex<T> {
    /// 0: unlocked; 1: locked; 2: locked, and a thread may be sleeping on it.
    state: AtomicU32,
    // SAFETY: reached only through a `FutexGuard`, of which at most one exists at a time (the
    // holder moved `state` from 0, and only its guard's drop moves it back).
    data: UnsafeCell<T>,
}

// SAFETY: one thread at a time reaches the data (see `data`), with the Acquire/Release of `state`
// ordering the holders' accesses: `T: Send` suffices, as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for FutexMutex<T> {}

impl<T> FutexMutex<T> {
    /// An unlocked mutex holding `data`.
    pub(crate) const fn new(data: T) -> FutexMutex<T> {
        FutexMutex {
            state: AtomicU32::new(0),
            data: UnsafeCell::new(data),
        }
    }

    /// Locks it, sleeping while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> FutexGuard<'_, T> {
        // Ordering: Acquire pairs with the Release in `unlock`: the new holder sees what the
        // previous one wrote.
        if self
            .state
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        FutexGuard {
            mutex: self,
            not_send: PhantomData,
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        // The holders' critical sections are short: spin a little before sleeping, while the word
        // says there is no sleeper to queue behind (as `std` does).
        for _ in 0..100 {
            // Ordering: a hint; the swap below is what acquires.
            if self.state.load(Ordering::Relaxed) != 1 {
                break;
            }
            std::hint::spin_loop();
        }
        // Setting 2 (even when taking it free) makes the next unlock wake a sleeper: at worst
        // one wake-up too many, never a sleeper left behind.
        // Ordering: Acquire, as in `lock`.
        while self.state.swap(2, Ordering::Acquire) != 0 {
            // SAFETY: FUTEX_WAIT on a valid, aligned u32 that outlives the call; it sleeps only
            // while the word is still 2 and returns on a wake, a signal or spuriously, all of
            // which loop.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.state.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    2u32,
                    std::ptr::null::<libc::timespec>(),
                );
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        // Ordering: Release pairs with the Acquire of the next `lock`.
        if self.state.swap(0, Ordering::Release) == 2 {
            self.wake_one();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_one(&self) {
        // SAFETY: FUTEX_WAKE on a valid, aligned u32 that outlives the call; it reads no other
        // memory and neither allocates nor blocks.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.state.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }
}

/// A held [`FutexMutex`]; unlocks it when dropped. Not `Send`: it is released on the thread that
/// took it (as `std`'s guard).
pub(crate) struct FutexGuard<'a, T> {
    mutex: &'a FutexMutex<T>,
    not_send: PhantomData<*const ()>,
}

// SAFETY: sharing the guard shares `&T` only (`Deref`), as for `std`'s guard.
unsafe impl<T: Sync> Sync for FutexGuard<'_, T> {}

impl<T> Deref for FutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `FutexMutex::data`), so no `&mut T` exists
        // apart from those borrowed from it, which the borrow checker keeps from overlapping.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for FutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this borrow exclusive.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for FutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.unlock();
    }
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

/// A mutex as the modelled protocols use it: `std`'s (poison ignored, see [`lock`]) or a
/// [`FutexMutex`] in the product, loom's in a model.
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

impl<T> Lock for FutexMutex<T> {
    type Data = T;
    type Guard<'a>
        = FutexGuard<'a, T>
    where
        T: 'a;
    fn lock(&self) -> FutexGuard<'_, T> {
        FutexMutex::lock(self)
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

#[cfg(test)]
mod tests {
    use super::FutexMutex;

    /// Threads that hold the lock across a read, a yield and a write lose no increment, however
    /// their turns interleave: the lock excludes, and its sleepers are woken (a lost wake-up
    /// would hang the test).
    #[test]
    fn a_futex_mutex_lets_one_holder_in_at_a_time_and_wakes_its_sleepers() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 2_000;
        let counter = FutexMutex::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for round in 0..ROUNDS {
                        let mut held = counter.lock();
                        let seen = *held;
                        if round % 16 == 0 {
                            // Long enough for the others to spin out and sleep on the futex.
                            std::thread::yield_now();
                        }
                        *held = seen + 1;
                    }
                });
            }
        });
        assert_eq!(*counter.lock(), THREADS * ROUNDS);
    }
}
