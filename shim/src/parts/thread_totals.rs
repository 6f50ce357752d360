//! Per-thread tables of totals: what each thread has allocated since start, per stack, and a
//! small cache of the stacks it interned.
//!
//! Charging a sample to the shared stack table would take the table's lock and write its line on
//! every sample; with several threads sampling, that line moves between cores each time (and a
//! thread sampling the same stack as another moves the stack's record too). Instead each thread
//! charges its own [`ThreadTotals`], behind its own mutex that only a snapshot, a `fork` or the
//! thread itself ever takes, and finds the id of a stack it has seen before in its own cache,
//! without touching the shared table at all. Only a stack new to the thread goes to the shared
//! table (the caller's `intern`, under that table's lock).
//!
//! Tables are never freed: a thread that exits hands its table back (a `pthread_key` destructor),
//! and the next new thread takes it over, so there are at most as many tables as threads ever ran
//! at once, and the figures of exited threads (keyed by thread uid) stay in the profile. That
//! handover ([`claim`], [`hand_back`]) is generic over its locks so that a loom model runs it.
//!
//! The table also keeps the sampling probabilities its thread computed lately
//! ([`ThreadTotals::sample_probability`]): the sampled path holds the table's lock anyway, and a
//! program allocates the same few sizes over and over, so most samples find theirs there instead
//! of calling libm's `expm1`.

use std::ffi::c_void;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Mutex;

use jeprof_dumpfmt::Estimate;

use crate::base::hash::{Map, MIX};
use crate::base::sync::{ExitKey, FutexGuard, FutexMutex, Lock};
use crate::base::thread::{self, Guard, TableOf, Tables};
use crate::parts::live_samples;

/// Entries in a thread's stack cache (direct-mapped by stack hash).
const CACHE_ENTRIES: usize = 64;

/// One cached stack: its hash, id, its interned frames, and what the owning thread allocated from
/// it since the entry was last flushed. One cache line: a sample whose stack is cached touches
/// this line and nothing else of the table.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct CacheEntry {
    hash: u64,
    /// The interned frames (the shared stack table's, which never frees them).
    frames: &'static [u64],
    /// The stack's id; `u32::MAX` marks an empty entry.
    id: u32,
    /// Allocated from this stack by the table's current owner, not yet in `accum`.
    pending: Estimate,
}

const EMPTY: CacheEntry = CacheEntry {
    hash: 0,
    frames: &[],
    id: u32::MAX,
    pending: Estimate {
        objects: 0.0,
        bytes: 0.0,
        objects_variance: 0.0,
        bytes_variance: 0.0,
    },
};

/// Entries in a table's probability cache (direct-mapped by requested size; a power of two).
const PROBABILITY_ENTRIES: usize = 16;

/// One cached probability: [`live_samples::sample_probability`]`(requested, period)`.
#[derive(Clone, Copy)]
struct CachedProbability {
    requested: usize,
    period: u64,
    probability: f64,
}

/// An entry no sample has filled yet: it holds the true value for its key (a size of 0 at period
/// 1 is sampled with probability 1 − e^0 = 0), so it needs no "empty" mark and a lookup needs no
/// test for one.
const NO_PROBABILITY: CachedProbability = CachedProbability {
    requested: 0,
    period: 1,
    probability: 0.0,
};

/// A thread's own figures: its table of totals.
pub(crate) struct ThreadTotals {
    cache: [CacheEntry; CACHE_ENTRIES],
    /// Probabilities computed lately, by requested size and period (what they are computed
    /// from: an entry is exact whoever filled it).
    probabilities: [CachedProbability; PROBABILITY_ENTRIES],
    /// uid of the thread that owns the table now (what `pending` figures belong to).
    owner: u64,
    /// Allocated since start per (stack id, thread uid), except what is still pending in the
    /// cache. One table may have served several threads in turn, hence the uid in the key.
    accum: Map<(u32, u64), Estimate>,
    /// Samples charged to this table.
    pub(crate) samples_taken: u64,
}

/// A table as threads, the registry and snapshots hold it.
pub(crate) type TableRef = &'static FutexMutex<ThreadTotals>;

// The thread state holds a `&'static FutexMutex<ThreadTotals>` (see `TableOf`).
impl TableOf for Tables {
    type Table = FutexMutex<ThreadTotals>;
}

/// Why a sample could not be charged.
pub(crate) enum ChargeError {
    /// The stack is new and the shared table holds `max_stacks` stacks.
    TableFull,
}

impl ThreadTotals {
    fn new(owner: u64) -> ThreadTotals {
        ThreadTotals {
            cache: [EMPTY; CACHE_ENTRIES],
            probabilities: [NO_PROBABILITY; PROBABILITY_ENTRIES],
            owner,
            accum: Map::default(),
            samples_taken: 0,
        }
    }

    /// Moves a cache entry's pending figures into `accum`.
    fn flush(&mut self, slot: usize) {
        let entry = &mut self.cache[slot];
        if entry.id != u32::MAX && !entry.pending.is_zero() {
            let pending = std::mem::take(&mut entry.pending);
            self.accum
                .entry((entry.id, self.owner))
                .or_default()
                .add(&pending);
        }
    }

    /// Hands the table to thread `owner`: what the previous owner left pending is filed under its
    /// uid first. The cached stacks stay valid (stack ids are global).
    fn take_over(&mut self, owner: u64) {
        for slot in 0..CACHE_ENTRIES {
            self.flush(slot);
        }
        self.owner = owner;
    }

    /// [`live_samples::sample_probability`]`(requested, period)`, from the cache when this size
    /// and period were asked for lately, to the last bit the same.
    ///
    /// Computing it calls libm's `expm1` (about 50 instructions); a hit costs a multiply, a load
    /// and two compares. Sizes repeat (a program's strings, nodes and buffers come in a few
    /// sizes), except for large buffers of varied size, which the sampler picks most often where
    /// they are common: those miss and cost a few instructions more than before.
    #[inline]
    pub(crate) fn sample_probability(&mut self, requested: usize, period: u64) -> f64 {
        // The top bits of a Fibonacci hash: sizes that differ in any bit spread over the slots.
        let slot = ((requested as u64).wrapping_mul(MIX)
            >> (64 - PROBABILITY_ENTRIES.trailing_zeros())) as usize;
        let entry = &mut self.probabilities[slot % PROBABILITY_ENTRIES];
        if entry.requested != requested || entry.period != period {
            *entry = CachedProbability {
                requested,
                period,
                probability: live_samples::sample_probability(requested, period),
            };
        }
        entry.probability
    }

    /// Finds `frames` in the cache, or else asks `intern` for its id and interned frames (the
    /// shared stack table's `intern`; `None` when the stack is new and the table full), and
    /// charges `estimate` to it for the table's owner; returns the stack id. `hash` is the hash
    /// the stack table interns `frames` under.
    pub(crate) fn charge(
        &mut self,
        frames: &[u64],
        hash: u64,
        estimate: &Estimate,
        intern: impl FnOnce() -> Option<(u32, &'static [u64])>,
    ) -> Result<u32, ChargeError> {
        let slot = (hash as usize) % CACHE_ENTRIES;
        let cached = &self.cache[slot];
        let hit = cached.hash == hash && cached.id != u32::MAX && cached.frames == frames;
        if !hit {
            let (id, interned) = intern().ok_or(ChargeError::TableFull)?;
            self.flush(slot);
            self.cache[slot] = CacheEntry {
                hash,
                frames: interned,
                id,
                pending: Estimate::default(),
            };
        }
        let entry = &mut self.cache[slot];
        entry.pending.add(estimate);
        self.samples_taken += 1;
        Ok(entry.id)
    }

    /// Everything charged to this table: (stack id, thread uid, figures), pending ones included.
    pub(crate) fn figures(&self) -> impl Iterator<Item = (u32, u64, Estimate)> + '_ {
        let filed = self.accum.iter().map(|(&(id, uid), e)| (id, uid, *e));
        let pending = self
            .cache
            .iter()
            .filter(|entry| entry.id != u32::MAX && !entry.pending.is_zero())
            .map(|entry| (entry.id, self.owner, entry.pending));
        filed.chain(pending)
    }

    /// Bytes this table holds.
    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<FutexMutex<ThreadTotals>>()
            + self.accum.capacity() * (std::mem::size_of::<((u32, u64), Estimate)>() + 1)
    }
}

/// Every table ever made (`all`), and those whose thread has exited (`free`).
pub(crate) struct Registry<T> {
    pub(crate) all: Vec<T>,
    free: Vec<T>,
}

impl<T> Registry<T> {
    const fn new() -> Registry<T> {
        Registry {
            all: Vec::new(),
            free: Vec::new(),
        }
    }
}

/// The registry. Lock order: registry → thread tables → stack table → live shards.
pub(crate) static REGISTRY: Mutex<Registry<TableRef>> = Mutex::new(Registry::new());

/// A table for the new thread `uid`: one an exited thread handed back, taken over (its figures
/// stay, filed under their threads' uids), or else a new one from `make`, registered. The caller
/// must [`hand_back`] it only once the thread will never use it again.
pub(crate) fn claim<T>(
    registry: &impl Lock<Data = Registry<T>>,
    uid: u64,
    make: impl FnOnce() -> T,
) -> T
where
    T: Clone + Deref,
    T::Target: Lock<Data = ThreadTotals>,
{
    let mut registry = registry.lock();
    match registry.free.pop() {
        Some(table) => {
            table.lock().take_over(uid);
            table
        }
        None => {
            let table = make();
            registry.all.push(table.clone());
            table
        }
    }
}

/// Makes `table` available to the next new thread; its owner has exited.
pub(crate) fn hand_back<T>(registry: &impl Lock<Data = Registry<T>>, table: T) {
    registry.lock().free.push(table);
}

/// The key whose destructor hands a thread's table back.
static EXIT_KEY: ExitKey = ExitKey::new();

/// Creates the thread-exit key; called once, by the profiler's initialisation.
pub(crate) fn create_exit_key() {
    EXIT_KEY.create(thread_exit);
}

/// This thread's table, locked: taken over from an exited thread or made, at the thread's first
/// sample. Call inside the re-entrancy guard (it may allocate).
#[inline]
pub(crate) fn this_thread() -> FutexGuard<'static, ThreadTotals> {
    match thread::with_thread(|t| t.table.get()).flatten() {
        Some(table) => table.lock(),
        None => claim_for_this_thread(),
    }
}

/// [`this_thread`] at the thread's first sample (out of line: once per thread).
#[cold]
#[inline(never)]
fn claim_for_this_thread() -> FutexGuard<'static, ThreadTotals> {
    let uid = thread::uid();
    let table: TableRef = claim(&REGISTRY, uid, || {
        &*Box::leak(Box::new(FutexMutex::new(ThreadTotals::new(uid))))
    });
    // Hand the table back at thread exit. Without the key (creation failed), the table just
    // stays with this thread's uid and is never reused.
    EXIT_KEY.arm(NonNull::from(table).cast());
    // The thread-local is `const` without a destructor, so this never fails on Linux; if it did,
    // every sample of the thread would take a table of its own from the registry.
    thread::with_thread(|t| t.table.set(Some(table)));
    table.lock()
}

/// The key's destructor, run by glibc at thread exit: the thread stops using its table (a later
/// sample on this thread, in another destructor, gets a fresh one) and the table goes back to the
/// registry for the next new thread.
extern "C" fn thread_exit(value: *mut c_void) {
    let _guard = Guard::enter();
    thread::with_thread(|t| t.table.set(None));
    if let Some(table) = NonNull::new(value) {
        // SAFETY: the key's only values are `&'static FutexMutex<ThreadTotals>` (`this_thread`).
        let table: TableRef = unsafe { table.cast::<FutexMutex<ThreadTotals>>().as_ref() };
        hand_back(&REGISTRY, table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::lock;

    fn estimate(objects: f64) -> Estimate {
        Estimate {
            objects,
            bytes: 16.0 * objects,
            objects_variance: objects,
            bytes_variance: 256.0 * objects,
        }
    }

    /// Sum of a table's figures per (stack id, uid).
    fn totals(table: &ThreadTotals) -> Vec<(u32, u64, f64)> {
        let mut sums: Map<(u32, u64), f64> = Map::default();
        for (id, uid, e) in table.figures() {
            *sums.entry((id, uid)).or_default() += e.objects;
        }
        let mut v: Vec<_> = sums.into_iter().map(|((i, u), o)| (i, u, o)).collect();
        v.sort_by_key(|x| (x.0, x.1));
        v
    }

    const A: &[u64] = &[0xACC0_0000_0001, 0xACC1_0000_0000];
    const B: &[u64] = &[0xACC0_0000_0002, 0xACC1_0000_0000];
    /// Two hashes for the same cache slot, so charging `B` evicts `A`'s entry.
    const HASH_A: u64 = 5;
    const HASH_B: u64 = 5 + CACHE_ENTRIES as u64;

    /// Charges `objects` to `frames`; `interned` is what the shared table would answer on a miss.
    fn charge(
        table: &mut ThreadTotals,
        frames: &'static [u64],
        hash: u64,
        interned: Option<u32>,
        objects: f64,
    ) -> Result<u32, ChargeError> {
        table.charge(frames, hash, &estimate(objects), || {
            interned.map(|id| (id, frames))
        })
    }

    #[test]
    fn every_charge_is_kept_through_cache_evictions_and_owner_changes() {
        let mut table = ThreadTotals::new(7);
        let ok = |r: Result<u32, ChargeError>| r.ok().unwrap();
        assert_eq!(ok(charge(&mut table, A, HASH_A, Some(1), 1.0)), 1);
        // A cached stack is found without asking the shared table (which would refuse it here).
        assert_eq!(ok(charge(&mut table, A, HASH_A, None, 2.0)), 1);
        assert_eq!(ok(charge(&mut table, B, HASH_B, Some(2), 4.0)), 2);
        // An evicted stack is interned again, under the id the shared table gives it.
        assert_eq!(ok(charge(&mut table, A, HASH_A, Some(1), 8.0)), 1);
        table.take_over(9);
        ok(charge(&mut table, A, HASH_A, Some(1), 16.0));
        ok(charge(&mut table, B, HASH_B, Some(2), 32.0));
        let want = vec![(1, 7, 11.0), (1, 9, 16.0), (2, 7, 4.0), (2, 9, 32.0)];
        assert_eq!(totals(&table), want);
        assert_eq!(table.samples_taken, 6);
    }

    #[test]
    fn a_cached_probability_is_the_computed_one_to_the_last_bit() {
        let mut table = ThreadTotals::new(1);
        // The unfilled entries hold the truth for their key.
        let empty = NO_PROBABILITY;
        assert_eq!(
            empty.probability.to_bits(),
            live_samples::sample_probability(empty.requested, empty.period).to_bits()
        );
        let periods = [1u64, 4096, 65_536, 524_288, 1 << 40];
        // More sizes than entries, each asked for twice in a row and again after the others
        // evicted it, at periods that change between asks.
        let sizes: Vec<usize> = (0..200)
            .map(|i| 1 + i * 37)
            .chain([1 << 20, 1 << 34])
            .collect();
        for round in 0..3 {
            for &period in &periods {
                for &requested in &sizes {
                    let want = live_samples::sample_probability(requested, period).to_bits();
                    for _ in 0..2 {
                        let got = table.sample_probability(requested, period).to_bits();
                        assert_eq!(got, want, "{requested} {period} round {round}");
                    }
                }
            }
        }
        assert_eq!(
            table.sample_probability(0, 0).to_bits(),
            live_samples::sample_probability(0, 0).to_bits()
        );
    }

    #[test]
    fn a_stack_with_an_equal_hash_but_other_frames_is_not_a_cache_hit() {
        let mut table = ThreadTotals::new(1);
        assert!(charge(&mut table, A, HASH_A, Some(1), 1.0).is_ok());
        // Same hash, different frames: the shared table must be asked (and refuses here).
        assert!(matches!(
            charge(&mut table, B, HASH_A, None, 1.0),
            Err(ChargeError::TableFull)
        ));
        assert_eq!(table.samples_taken, 1);
    }

    #[test]
    fn a_new_stack_beyond_the_cap_is_refused_and_charges_nothing() {
        let mut table = ThreadTotals::new(1);
        assert!(matches!(
            charge(&mut table, A, HASH_A, None, 1.0),
            Err(ChargeError::TableFull)
        ));
        assert_eq!(table.figures().count(), 0);
        assert_eq!(table.samples_taken, 0);
    }

    #[test]
    fn a_handed_back_table_goes_to_the_next_new_thread_with_its_figures() {
        let registry: Mutex<Registry<TableRef>> = Mutex::new(Registry::new());
        let make = |uid| {
            move || -> TableRef { Box::leak(Box::new(FutexMutex::new(ThreadTotals::new(uid)))) }
        };
        let first = claim(&registry, 1, make(1));
        assert!(charge(&mut first.lock(), A, HASH_A, Some(1), 3.0).is_ok());
        let second = claim(&registry, 2, make(2));
        assert!(
            !std::ptr::eq(first, second),
            "a live thread's table is not shared"
        );
        hand_back(&registry, first);
        let third = claim(&registry, 3, make(3));
        assert!(std::ptr::eq(first, third));
        assert!(charge(&mut third.lock(), A, HASH_A, Some(1), 5.0).is_ok());
        assert_eq!(totals(&third.lock()), vec![(1, 1, 3.0), (1, 3, 5.0)]);
        assert_eq!(lock(&registry).all.len(), 2);
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::*;
    use crate::base::sync::loom_types::{model, thread, Arc, AtomicBool, AtomicUsize};
    use crate::base::sync::Published;

    type LoomMutex<T> = crate::base::sync::loom_types::Mutex<T>;
    type Table = Arc<LoomMutex<ThreadTotals>>;
    type ExitKeyWord = Published<AtomicUsize, AtomicBool>;

    const FRAMES: &[u64] = &[0x1000, 0x2000];
    const CHARGES: u64 = 2;
    const KEY: usize = 3;

    /// One thread's life as the profiler runs it: claim a table, check it holds every figure its
    /// earlier owners charged (whole lives of `CHARGES` samples each), charge `CHARGES` samples,
    /// check no other thread took the table meanwhile, and at exit hand it back if the exit key
    /// was armed (as the key's destructor does; unarmed, the table stays with its thread).
    fn life(registry: &LoomMutex<Registry<Table>>, key: &ExitKeyWord, uid: u64) {
        let table = claim(registry, uid, || {
            Arc::new(LoomMutex::new(ThreadTotals::new(uid)))
        });
        {
            let t = Lock::lock(&*table);
            let earlier: f64 = t
                .figures()
                .filter(|&(_, owner, _)| owner != uid)
                .map(|(_, _, e)| e.objects)
                .sum();
            assert_eq!(
                t.samples_taken % CHARGES,
                0,
                "an earlier owner's life is cut"
            );
            assert_eq!(
                earlier, t.samples_taken as f64,
                "an earlier owner's figure is missing"
            );
        }
        let one = Estimate {
            objects: 1.0,
            bytes: 16.0,
            objects_variance: 0.0,
            bytes_variance: 0.0,
        };
        for _ in 0..CHARGES {
            let charged = Lock::lock(&*table).charge(FRAMES, 1, &one, || Some((0, FRAMES)));
            assert!(charged.is_ok());
        }
        assert_eq!(
            Lock::lock(&*table).owner,
            uid,
            "two live threads own one table"
        );
        if let Some(armed) = key.get() {
            assert_eq!(armed, KEY, "armed a key that is not the exit key");
            hand_back(registry, table);
        }
    }

    #[test]
    fn loom_a_table_handed_over_keeps_its_figures_and_has_one_live_owner() {
        model(|| {
            let registry = Arc::new(LoomMutex::new(Registry::new()));
            let key = Arc::new(Published::from_words(
                AtomicUsize::new(0),
                AtomicBool::new(false),
            ));
            // The profiler's initialisation creates the exit key while threads already sample.
            let init = {
                let key = key.clone();
                thread::spawn(move || key.set(KEY))
            };
            let other = {
                let (registry, key) = (registry.clone(), key.clone());
                thread::spawn(move || life(&registry, &key, 1))
            };
            life(&registry, &key, 0);
            init.join().unwrap();
            other.join().unwrap();
            let registry = Lock::lock(&*registry);
            let charged: u64 = registry
                .all
                .iter()
                .map(|t| Lock::lock(&**t).samples_taken)
                .sum();
            assert_eq!(charged, 2 * CHARGES, "a charge was lost");
        });
    }
}
