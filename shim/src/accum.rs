//! Per-thread tables: what each thread has allocated since start, per stack, and a small cache of
//! the stacks it interned.
//!
//! Charging a sample to the shared stack table would take the table's lock and write its line on
//! every sample; with several threads sampling, that line moves between cores each time (and a
//! thread sampling the same stack as another moves the stack's record too). Instead each thread
//! charges its own [`ThreadTable`], behind its own mutex that only a snapshot, a `fork` or the
//! thread itself ever takes, and finds the id of a stack it has seen before in its own cache,
//! without touching the shared table at all. Only a stack new to the thread goes to the shared
//! table (under its lock).
//!
//! Tables are never freed: a thread that exits hands its table back (a `pthread_key` destructor),
//! and the next new thread takes it over, so there are at most as many tables as threads ever ran
//! at once, and the figures of exited threads (keyed by thread uid) stay in the profile.

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

use jeprof_dumpfmt::Estimate;

use crate::exit_key::ExitKey;
use crate::table::{lock, Map, StackTable, STACKS};

/// Entries in a thread's stack cache (direct-mapped by stack hash).
const CACHE_ENTRIES: usize = 64;

/// One cached stack: its hash, id, where its frames live in the shared table, and what the owning
/// thread allocated from it since the entry was last flushed. One cache line: a sample whose stack
/// is cached touches this line and nothing else of the table.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct CacheEntry {
    hash: u64,
    /// The interned frames (a `Box<[u64]>` of the shared table, which never moves or frees them).
    frames: *const u64,
    len: u32,
    id: u32,
    /// Allocated from this stack by the table's current owner, not yet in `accum`.
    pending: Estimate,
}

const EMPTY: CacheEntry = CacheEntry {
    hash: 0,
    frames: std::ptr::null(),
    len: 0,
    id: u32::MAX,
    pending: Estimate {
        objects: 0.0,
        bytes: 0.0,
        objects_variance: 0.0,
        bytes_variance: 0.0,
    },
};

/// A thread's own figures.
pub(crate) struct ThreadTable {
    cache: [CacheEntry; CACHE_ENTRIES],
    /// uid of the thread that owns the table now (what `pending` figures belong to).
    owner: u64,
    /// Allocated since start per (stack id, thread uid), except what is still pending in the
    /// cache. One table may have served several threads in turn, hence the uid in the key.
    accum: Map<(u32, u64), Estimate>,
    /// Samples charged to this table.
    pub(crate) samples_taken: u64,
}

// SAFETY: the raw pointers in the cache point into frames owned by the shared stack table, which
// never moves or frees them; they are only read, by whichever thread holds the table's mutex.
unsafe impl Send for ThreadTable {}

/// Why a sample could not be charged.
pub(crate) enum ChargeError {
    /// The stack is new and the shared table holds `max_stacks` stacks.
    TableFull,
}

impl ThreadTable {
    fn new(owner: u64) -> ThreadTable {
        ThreadTable {
            cache: [EMPTY; CACHE_ENTRIES],
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

    /// Finds (or interns) `frames` and charges `estimate` to it for the table's owner; returns
    /// the stack id. `hash` is `table::stack_hash(frames)`.
    pub(crate) fn charge(
        &mut self,
        frames: &[u64],
        hash: u64,
        estimate: &Estimate,
        max_stacks: usize,
    ) -> Result<u32, ChargeError> {
        debug_assert_eq!(hash, crate::table::stack_hash(frames));
        let slot = (hash as usize) % CACHE_ENTRIES;
        let cached = &self.cache[slot];
        let hit = cached.hash == hash && !cached.frames.is_null() && {
            // SAFETY: `frames`/`len` describe a live `Box<[u64]>` of the shared stack table (see
            // `CacheEntry`), written before this thread read its address under the table's lock.
            unsafe { std::slice::from_raw_parts(cached.frames, cached.len as usize) == frames }
        };
        if !hit {
            let (id, interned) = {
                let mut stacks = lock(&STACKS);
                let table = stacks.get_or_insert_with(StackTable::default);
                let Some(id) = table.intern(frames, hash, max_stacks) else {
                    return Err(ChargeError::TableFull);
                };
                let interned = &table.records[id as usize].frames;
                (id, (interned.as_ptr(), interned.len()))
            };
            self.flush(slot);
            self.cache[slot] = CacheEntry {
                hash,
                frames: interned.0,
                len: interned.1 as u32,
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
        std::mem::size_of::<Mutex<ThreadTable>>()
            + self.accum.capacity() * (std::mem::size_of::<((u32, u64), Estimate)>() + 1)
    }
}

/// Every table ever made (`all`), and those whose thread has exited (`free`).
pub(crate) struct Registry {
    pub(crate) all: Vec<&'static Mutex<ThreadTable>>,
    free: Vec<&'static Mutex<ThreadTable>>,
}

/// The registry. Lock order: registry → thread tables → stack table → live shards.
pub(crate) static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    all: Vec::new(),
    free: Vec::new(),
});

/// The key whose destructor hands a thread's table back.
static EXIT_KEY: ExitKey = ExitKey::new();

/// Creates the thread-exit key; called once, by the profiler's initialisation.
pub(crate) fn create_exit_key() {
    EXIT_KEY.create(thread_exit);
}

/// This thread's table, locked: taken over from an exited thread or made, at the thread's first
/// sample. Call inside the re-entrancy guard (it may allocate).
pub(crate) fn this_thread() -> MutexGuard<'static, ThreadTable> {
    let cached = crate::sampler::with_thread(|t| t.table.get()).unwrap_or(0);
    if cached != 0 {
        // SAFETY: a non-zero word is a `&'static Mutex<ThreadTable>` stored by the branch below.
        return lock(unsafe { &*(cached as *const Mutex<ThreadTable>) });
    }
    let uid = crate::sampler::thread_uid();
    let table: &'static Mutex<ThreadTable> = {
        let mut registry = lock(&REGISTRY);
        match registry.free.pop() {
            Some(table) => {
                lock(table).take_over(uid);
                table
            }
            None => {
                let table: &'static Mutex<ThreadTable> =
                    Box::leak(Box::new(Mutex::new(ThreadTable::new(uid))));
                registry.all.push(table);
                table
            }
        }
    };
    let word = table as *const Mutex<ThreadTable> as usize;
    // Hand the table back at thread exit. Without the key (creation failed), the table just
    // stays with this thread's uid and is never reused.
    EXIT_KEY.arm(word);
    // The thread-local is `const` without a destructor, so this never fails on Linux; if it did,
    // every sample of the thread would take a table of its own from the registry.
    crate::sampler::with_thread(|t| t.table.set(word));
    lock(table)
}

/// The key's destructor, run by glibc at thread exit: the thread stops using its table (a later
/// sample on this thread, in another destructor, gets a fresh one) and the table goes back to the
/// registry for the next new thread.
extern "C" fn thread_exit(value: *mut c_void) {
    let _guard = crate::sampler::Guard::enter();
    crate::sampler::with_thread(|t| t.table.set(0));
    if !value.is_null() {
        // SAFETY: the key's values are `&'static Mutex<ThreadTable>` addresses (`this_thread`).
        let table = unsafe { &*(value as *const Mutex<ThreadTable>) };
        lock(&REGISTRY).free.push(table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::stack_hash;

    fn estimate(objects: f64) -> Estimate {
        Estimate {
            objects,
            bytes: 16.0 * objects,
            objects_variance: objects,
            bytes_variance: 256.0 * objects,
        }
    }

    /// Sum of a table's figures per (stack id, uid).
    fn totals(table: &ThreadTable) -> Vec<(u32, u64, f64)> {
        let mut sums: Map<(u32, u64), f64> = Map::default();
        for (id, uid, e) in table.figures() {
            *sums.entry((id, uid)).or_default() += e.objects;
        }
        let mut v: Vec<_> = sums.into_iter().map(|((i, u), o)| (i, u, o)).collect();
        v.sort_by_key(|x| (x.0, x.1));
        v
    }

    /// Stacks of a test-private shape, so the process-wide stack table's other users never
    /// intern them.
    fn stack(n: u64) -> Vec<u64> {
        vec![0xACC0_0000_0000 + n, 0xACC1_0000_0000, n]
    }

    #[test]
    fn every_charge_is_kept_through_cache_evictions_and_owner_changes() {
        let mut table = ThreadTable::new(7);
        let a = stack(1);
        // A second stack in the same cache slot, so charging it evicts `a`'s entry.
        let slot = |f: &[u64]| stack_hash(f) as usize % CACHE_ENTRIES;
        let b = (2..).map(stack).find(|f| slot(f) == slot(&a)).unwrap();
        let charge = |t: &mut ThreadTable, f: &[u64], o: f64| {
            t.charge(f, stack_hash(f), &estimate(o), usize::MAX)
                .ok()
                .unwrap()
        };
        let id_a = charge(&mut table, &a, 1.0);
        assert_eq!(
            charge(&mut table, &a, 2.0),
            id_a,
            "a cached stack keeps its id"
        );
        let id_b = charge(&mut table, &b, 4.0);
        assert_ne!(id_a, id_b);
        assert_eq!(
            charge(&mut table, &a, 8.0),
            id_a,
            "an evicted stack keeps its id"
        );
        table.take_over(9);
        charge(&mut table, &a, 16.0);
        charge(&mut table, &b, 32.0);
        let mut want = vec![
            (id_a, 7, 11.0),
            (id_b, 7, 4.0),
            (id_a, 9, 16.0),
            (id_b, 9, 32.0),
        ];
        want.sort_by_key(|x| (x.0, x.1));
        assert_eq!(totals(&table), want);
        assert_eq!(table.samples_taken, 6);
    }

    #[test]
    fn a_new_stack_beyond_the_cap_is_refused_and_charges_nothing() {
        let mut table = ThreadTable::new(1);
        let f = stack(1_000_003);
        assert!(matches!(
            table.charge(&f, stack_hash(&f), &estimate(1.0), 0),
            Err(ChargeError::TableFull)
        ));
        assert_eq!(table.figures().count(), 0);
        assert_eq!(table.samples_taken, 0);
    }
}
