//! Everything the profiler keeps per thread, in one 64-byte `const`-initialised thread-local
//! without a destructor ([`ThreadState`]), and the re-entrancy [`Guard`].
//!
//! One line for all of it: the fast path keeps the countdown's line in cache anyway, so the
//! sampled path finds the thread's generator, uid, stack top, table and sampled tcache there too
//! instead of missing once per variable. `const` and destructor-free: usable before `main`, during
//! thread-local destruction and in exiting threads. `try_with` failing (it never does for such
//! thread-locals on Linux, but the API allows it) means "pass through".
//!
//! The fields belong to the modules a layer up that read and write them (the sampler, stack
//! capture, the sampled arena, the per-thread tables); this module only holds them, and imports
//! nothing of the crate.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Names the type of the table a thread charges its samples to, for [`ThreadState::table`]. That
/// type is defined a layer up (`parts::thread_totals`, which implements this trait for [`Tables`]),
/// so this layer holds a typed reference to it without importing it: the layer above names the
/// type here, much as it would register a function pointer at init.
pub(crate) trait TableOf {
    /// The per-thread table (behind its lock).
    type Table: 'static;
}

/// The one implementor of [`TableOf`].
pub(crate) enum Tables {}

/// A thread's table, whatever the layer above made it.
pub(crate) type Table = <Tables as TableOf>::Table;

/// A thread's profiler state: one cache line.
#[repr(C, align(64))]
pub(crate) struct ThreadState {
    /// Bytes this thread may still allocate before its next sample: an allocation of `size` bytes
    /// is a sample when `size > countdown`. The only field the fast path touches (the sampler's).
    /// Unused when the process's C entry keeps the countdown itself ([`count_down_in`]): the
    /// slow path reaches the countdown through [`ThreadState::countdown_in_use`].
    pub(crate) countdown: Cell<u64>,
    /// The period R the current countdown was drawn with (0: sampling was off).
    pub(crate) period: Cell<u64>,
    /// splitmix64 state of this thread's generator (the sampler's).
    pub(crate) rng: Cell<u64>,
    /// The settings epoch this thread last drew its countdown in ([`epoch`]; 0: never).
    pub(crate) seen_epoch: Cell<u64>,
    /// This thread's uid (the `t<uid>` of dumps), `u64::MAX` until assigned ([`uid`]).
    uid: Cell<u64>,
    /// Top of this thread's stack for the frame-pointer walker (stack capture's): 0 = not asked
    /// yet, 1 = unknown.
    pub(crate) stack_top: Cell<usize>,
    /// This thread's table (the per-thread tables'), `None` until its first sample and after its
    /// exit hook handed the table back.
    pub(crate) table: Cell<Option<&'static Table>>,
    /// This thread's explicit jemalloc tcache for the sampled arena, in the sampled arena's
    /// encoding; 0 until the arena first asks.
    pub(crate) sampled_tcache: Cell<u32>,
    /// The scope this thread's allocations are charged to (the scopes' interned id; 0: none). Set
    /// by scope guards and the `scope` future around each poll; read only on the sampled path,
    /// so the fast path is unchanged. In what was this line's padding.
    pub(crate) scope: Cell<u16>,
    /// True while the profiler itself runs on this thread: its allocations are never sampled.
    in_profiler: Cell<bool>,
}

const _: () = assert!(std::mem::size_of::<ThreadState>() == 64);

impl ThreadState {
    /// The countdown this thread's allocations subtract from: [`ThreadState::countdown`], or the
    /// word the process's C entry keeps ([`count_down_in`]). Everything but `Profiled`'s fast
    /// path reads and writes the countdown through this.
    #[inline]
    pub(crate) fn countdown_in_use(&self) -> &Cell<u64> {
        // Ordering: the pointer is the only datum published (what it names is code). Every
        // slow path stores it before reading the countdown. A thread that has had none, and no
        // happens-before edge from one, may read null in a guard and park its own cell instead:
        // then an allocation inside the guard that exhausts the C entry's word takes the slow
        // path, which stores the pointer and parks the word, and the guard's end sets the word
        // to the cell's parked value (0 for such a thread), so its next allocation redraws.
        let word = OUTSIDE_COUNTDOWN.load(Ordering::Relaxed);
        if word.is_null() {
            return &self.countdown;
        }
        // SAFETY: only `count_down_in` stores here, and it stores a `fn() -> *mut u64`.
        let word = unsafe { std::mem::transmute::<*mut (), fn() -> *mut u64>(word) };
        // SAFETY: `count_down_in`'s contract: the word is this thread's, valid for the thread's
        // life, aligned, and touched by this thread only; `Cell<u64>` has `u64`'s layout, and a
        // shared `Cell` allows the writes the word receives through other pointers on this
        // thread (the C entry's fast path, between the profiler's uses of this reference).
        unsafe { &*word().cast::<Cell<u64>>() }
    }
}

/// The function returning the calling thread's countdown word, when the process's C entry keeps
/// the countdown outside [`ThreadState`] ([`count_down_in`]); null until then.
static OUTSIDE_COUNTDOWN: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Makes the word `word` returns the countdown of every thread's slow path, guards and restarts
/// ([`ThreadState::countdown_in_use`]). The preload library keeps its countdown in an
/// initial-exec thread-local of its own (a shared library's Rust thread-locals are reached
/// through `__tls_get_addr`), and calls this on every slow path, before the countdown is read.
///
/// # Safety
/// `word` returns, on every thread, that thread's countdown: aligned, valid for the thread's life
/// (no destructor), and read or written by that thread only. Every call passes the same function.
pub(crate) unsafe fn count_down_in(word: fn() -> *mut u64) {
    // Ordering: see `countdown_in_use`.
    OUTSIDE_COUNTDOWN.store(word as *mut (), Ordering::Relaxed);
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            countdown: Cell::new(0),
            period: Cell::new(0),
            rng: Cell::new(0),
            seen_epoch: Cell::new(0),
            uid: Cell::new(u64::MAX),
            stack_top: Cell::new(0),
            table: Cell::new(None),
            sampled_tcache: Cell::new(0),
            scope: Cell::new(0),
            in_profiler: Cell::new(false),
        }
    };
}

/// Runs `f` on this thread's state; `None` only if the thread-local is unavailable.
#[inline(always)]
pub(crate) fn with_thread<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    THREAD.try_with(f).ok()
}

/// Makes `scope` this thread's current scope and returns the previous one (0 if the
/// thread-local is unavailable, which it never is on Linux).
#[inline]
pub(crate) fn replace_scope(scope: u16) -> u16 {
    THREAD.try_with(|t| t.scope.replace(scope)).unwrap_or(0)
}

/// This thread's current scope (0: none).
#[inline]
pub(crate) fn scope() -> u16 {
    THREAD.try_with(|t| t.scope.get()).unwrap_or(0)
}

/// This thread's current scope, or 0 while the profiler itself runs on it (its tables are no
/// scope's memory).
#[inline]
pub(crate) fn scope_outside_profiler() -> u16 {
    THREAD
        .try_with(|t| {
            if t.in_profiler.get() {
                0
            } else {
                t.scope.get()
            }
        })
        .unwrap_or(0)
}

/// What every thread compares its state with, in a line of its own: both words are written
/// rarely (a settings change, a thread's first sample) and read on the sampled path.
#[repr(C, align(64))]
struct Shared {
    /// Bumped whenever the sample rate, activity or seed changes ([`restart_countdowns`]), so
    /// threads redraw their countdown. Starts at 1, so a new thread (epoch 0) always draws.
    epoch: AtomicU64,
    /// Next thread uid, in the order threads first ask for one.
    next_uid: AtomicU64,
}

static SHARED: Shared = Shared {
    epoch: AtomicU64::new(1),
    next_uid: AtomicU64::new(0),
};

/// The settings epoch: see [`restart_countdowns`].
#[inline]
pub(crate) fn epoch() -> u64 {
    // Ordering: a counter read on its own; the settings it announces are read with their own
    // loads.
    SHARED.epoch.load(Ordering::Relaxed)
}

/// Makes every thread redraw its countdown at its next slow path, and the calling thread at its
/// next allocation (or, inside a [`Guard`], at its first allocation after the guard). Called
/// after the sample rate, activity or seed changed.
pub(crate) fn restart_countdowns() {
    // Ordering: see `epoch`; the counter carries no data.
    SHARED.epoch.fetch_add(1, Ordering::Relaxed);
    // Inside a guard, the guard's end sees the new epoch and does this.
    let _ = THREAD.try_with(|t| {
        if !t.in_profiler.get() {
            t.countdown_in_use().set(0);
        }
    });
}

/// `t`'s uid, assigned on first use in the order threads ask.
pub(crate) fn uid_of(t: &ThreadState) -> u64 {
    let uid = t.uid.get();
    if uid != u64::MAX {
        return uid;
    }
    // Ordering: a unique-ticket counter; nothing else is published through it.
    let uid = SHARED.next_uid.fetch_add(1, Ordering::Relaxed);
    t.uid.set(uid);
    uid
}

/// This thread's uid ([`uid_of`]); `u64::MAX − 1` if the thread-local is unavailable.
pub(crate) fn uid() -> u64 {
    THREAD.try_with(uid_of).unwrap_or(u64::MAX - 1)
}

/// Whether the profiler itself runs on this thread (a [`Guard`] is alive).
#[inline]
pub(crate) fn in_profiler(t: &ThreadState) -> bool {
    t.in_profiler.get()
}

/// Countdown while inside a [`Guard`]: the profiler's own allocations never reach the slow path
/// (only after 2^62 bytes inside one guard).
pub(crate) const GUARDED_COUNTDOWN: u64 = 1 << 62;

/// The re-entrancy guard: while one is alive on a thread, that thread's allocations are never
/// sampled (they go straight to the inner allocator) and do not consume its countdown, so the
/// profiler's own allocations (whose sizes depend on addresses and timing) leave seeded sampling
/// deterministic. Restores the previous state on drop, so guards nest.
pub(crate) struct Guard {
    was_inside: bool,
    /// The countdown parked by the outermost guard.
    saved_countdown: u64,
}

impl Guard {
    /// Marks this thread as inside the profiler.
    pub(crate) fn enter() -> Guard {
        THREAD
            .try_with(|t| {
                let was_inside = t.in_profiler.replace(true);
                let saved_countdown = if was_inside {
                    0
                } else {
                    t.countdown_in_use().replace(GUARDED_COUNTDOWN)
                };
                Guard {
                    was_inside,
                    saved_countdown,
                }
            })
            .unwrap_or(Guard {
                was_inside: true,
                saved_countdown: 0,
            })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|t| {
            if !self.was_inside {
                // Settings changed meanwhile (maybe by this very thread): restart the countdown
                // at the next allocation, as `restart_countdowns` does outside a guard.
                let changed = t.seen_epoch.get() != epoch();
                t.countdown_in_use()
                    .set(if changed { 0 } else { self.saved_countdown });
            }
            t.in_profiler.set(self.was_inside);
        });
    }
}

/// Starts `body` on a thread named `name`, unless this process already started one through `slot`
/// (which holds the pid of the process that did: a forked child, whose pid differs, starts its
/// own). Inside a [`Guard`], so that the thread's creation is not sampled. If the thread cannot be
/// started, says so on stderr (`what` names it) and clears `slot`, so that a later call tries
/// again. Call only outside an allocation.
pub(crate) fn spawn_once_per_process(slot: &AtomicU32, name: &str, what: &str, body: fn()) {
    let pid = std::process::id();
    // Ordering: the exchange only elects the starting thread; the thread reads what it needs
    // with its own loads.
    let current = slot.load(Ordering::Relaxed);
    if current == pid
        || slot
            .compare_exchange(current, pid, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let _guard = Guard::enter();
    let spawned = std::thread::Builder::new().name(name.into()).spawn(body);
    if let Err(e) = spawned {
        eprintln!("jeprof-shim: could not start the {what} thread: {e}");
        // Ordering: as above.
        slot.store(0, Ordering::Relaxed);
    }
}
