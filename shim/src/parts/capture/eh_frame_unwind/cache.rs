//! The rules by return address: a 1,024-slot cache of 512 sets of two per pool slot, a miss
//! computed from the snapshot's unwind tables, and the pool of caches a capture takes one from
//! with one atomic swap.

use std::sync::atomic::{AtomicPtr, Ordering};

use gimli::{Register, RegisterRule, UnwindContext, UnwindContextStorage, UnwindTableRow};

use super::arch::Rule;
use super::lookup::{current_snapshot, Snapshot};
use crate::base::thread::Guard;

/// gimli's working storage for evaluating one FDE's CFI program, fixed-size so that a cache
/// miss never allocates: 32 register rules (x86_64 CFI names at most 17 registers; aarch64's
/// at most 22 callee-saved ones and `RA_SIGN_STATE`) and 4
/// remembered states (`DW_CFA_remember_state` nesting). A program that needs more is an error,
/// and the walk stops there.
struct FixedStorage;

impl UnwindContextStorage<usize> for FixedStorage {
    type Rules = [(Register, RegisterRule<usize>); 32];
    type Stack = [UnwindTableRow<usize, Self>; 4];
}

/// Slots of a rule cache: a power of two, in sets of two indexed by a hash of the return
/// address.
///
/// Two ways, not one: with one slot per hash, two return addresses of one hot stack that hash
/// alike evict each other on every capture, and which do depends on where the linker put the
/// code. One build of the `kv-store` workload had such a pair: two misses per capture, about
/// 9,800 instructions per capture instead of 1,550 (`bench/RESULTS.md`).
pub(super) const RULE_SLOTS: usize = 1024;

/// One slot: an address and its rule; address 0 (never looked up) marks an empty slot.
/// Sixteen bytes, so a slot is found with a shift, and a slot never straddles cache lines.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub(super) struct Entry {
    pub(super) address: u64,
    pub(super) rule: Rule,
}

/// Rules by return address, and what computing a missing one needs.
///
/// Two parts, so that the walk can hold the slots (their address stays in a register across
/// the cold miss call) and the miss path the rest, each borrowed on its own.
pub(super) struct RuleCache {
    pub(super) entries: Box<[Entry; RULE_SLOTS]>,
    pub(super) state: MissState,
}

/// What a miss needs besides the slots.
pub(super) struct MissState {
    /// The snapshot (`changes`) the rules were computed under; the slots are cleared when it
    /// differs, since an address may then belong to another object.
    generation: u64,
    /// The snapshot checked against the loader during the capture in progress (`None` at the
    /// start of every capture): the first miss of a capture checks, the others reuse it.
    pub(super) checked: Option<&'static Snapshot>,
    /// Captures since this cache last compared its generation with the loader's counters.
    pub(super) uses: u32,
    /// The index of the object that held the last missed address (neighbouring frames
    /// mostly share an object).
    hint: usize,
    context: Box<UnwindContext<usize, FixedStorage>>,
}

const NO_ENTRY: Entry = Entry {
    address: 0,
    rule: Rule::STOP,
};

impl RuleCache {
    fn new() -> RuleCache {
        // Built on the heap (a 16 KiB array is too much for a small thread's stack).
        let entries: Box<[Entry]> = vec![NO_ENTRY; RULE_SLOTS].into_boxed_slice();
        RuleCache {
            entries: entries.try_into().unwrap_or_else(|_| unreachable!()),
            state: MissState {
                generation: u64::MAX,
                checked: None,
                uses: 0,
                hint: 0,
                context: Box::new(UnwindContext::new_in()),
            },
        }
    }
}

/// The rule for `address` (a return address minus one, or the first frame's pc).
#[inline(always)]
pub(super) fn rule<'e>(
    entries: &'e mut [Entry; RULE_SLOTS],
    state: &mut MissState,
    address: u64,
) -> &'e Rule {
    // Fibonacci hashing on the low 32 bits (one multiply by an immediate; the slots only
    // need neighbouring addresses spread): the top 9 bits of the product index the 2^9 sets
    // of two slots, so no bounds check is needed.
    let set = ((address as u32).wrapping_mul(0x9e37_79b1) >> 23) as usize * 2;
    // An empty slot's address is 0, which is never looked up (`walk` stops below 4096).
    if entries[set].address != address {
        if entries[set + 1].address == address {
            return &entries[set + 1].rule;
        }
        state.miss(entries, address, set);
    }
    // Read from the slot on both paths, so a hit loads each field straight from it.
    &entries[set].rule
}

impl MissState {
    /// Brings the snapshot up to date with the loader and empties the slots if it changed.
    /// `None` if there is no snapshot (the loader gave no counters).
    pub(super) fn sync(&mut self, entries: &mut [Entry; RULE_SLOTS]) -> Option<&'static Snapshot> {
        self.uses = 0;
        let snapshot = current_snapshot()?;
        if self.generation != snapshot.changes {
            entries.fill(NO_ENTRY);
            self.generation = snapshot.changes;
        }
        self.checked = Some(snapshot);
        Some(snapshot)
    }

    /// Computes and stores the rule for `address` in the first slot of the set at `set`
    /// (moving what was there to the second, and dropping what was in the second): the cold
    /// path.
    #[cold]
    #[inline(never)]
    fn miss(&mut self, entries: &mut [Entry; RULE_SLOTS], address: u64, set: usize) {
        let set = (set % RULE_SLOTS) & !1;
        let entry = self.compute(entries, address);
        // After `compute`, which may have emptied every slot (a new snapshot).
        entries[set + 1] = entries[set];
        entries[set] = entry;
    }

    /// The slot for `address`: its rule from the unwind tables.
    fn compute(&mut self, entries: &mut [Entry; RULE_SLOTS], address: u64) -> Entry {
        // The unwind tables are read only here, and only through a snapshot checked against
        // the loader during this capture (at its first miss: one `dl_iterate_phdr` per
        // capture, not per miss). That is as good as checking before every read: the tables
        // read are those of objects holding this thread's return addresses, which were
        // loaded before the capture began and cannot be unloaded while it runs, so the
        // snapshot names them correctly (see `Snapshot`).
        let checked = match self.checked {
            Some(snapshot) => Some(snapshot),
            None => self.sync(entries),
        };
        let Some(snapshot) = checked else {
            return Entry {
                address,
                rule: Rule::STOP,
            };
        };
        let rule = match snapshot.find(address, &mut self.hint) {
            None => Rule::STOP,
            Some(object) => object
                .fde_for(address)
                .and_then(|fde| {
                    let row = fde
                        .unwind_info_for_address(
                            &object.eh_frame,
                            &object.bases,
                            &mut self.context,
                            address,
                        )
                        .ok()?;
                    Some(Rule::from_row(row, fde.cie().return_address_register()))
                })
                .unwrap_or(Rule::STOP),
        };
        Entry { address, rule }
    }
}

/// Rule caches, taken by a capture with one swap and put back after it. A thread starts at
/// the slot of its uid, so threads rarely meet in one.
pub(super) const CACHE_SLOTS: usize = 16;
static CACHES: [AtomicPtr<RuleCache>; CACHE_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; CACHE_SLOTS];

/// A rule cache from the pool, starting at `slot`, or a new one (allocated under the
/// re-entrancy guard).
#[inline(always)]
pub(super) fn take_cache(slot: usize) -> Option<CacheBox> {
    // Ordering: Acquire pairs with the Release in `put_cache`, so the cache's contents
    // written by the thread that last used it are visible here.
    let p = CACHES[slot % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
    if !p.is_null() {
        return Some(CacheBox(p));
    }
    take_cache_elsewhere(slot)
}

/// [`take_cache`] when this thread's first slot is empty: the other slots, then a new cache.
#[cold]
#[inline(never)]
fn take_cache_elsewhere(slot: usize) -> Option<CacheBox> {
    for i in 1..CACHE_SLOTS {
        // Ordering: as in `take_cache`.
        let p = CACHES[(slot + i) % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
        if !p.is_null() {
            return Some(CacheBox(p));
        }
    }
    let _guard = Guard::enter();
    Some(CacheBox(Box::into_raw(Box::new(RuleCache::new()))))
}

/// Puts a cache back into an empty slot, starting at `slot`, or frees it if all are full.
pub(super) fn put_cache(cache: CacheBox, slot: usize) {
    let p = cache.0;
    std::mem::forget(cache);
    for i in 0..CACHE_SLOTS {
        // Ordering: Release pairs with the Acquire swap in `take_cache`.
        if CACHES[(slot + i) % CACHE_SLOTS]
            .compare_exchange(
                std::ptr::null_mut(),
                p,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            return;
        }
    }
    drop(CacheBox(p));
}

/// An owned rule cache taken out of the pool.
///
/// Invariant: `.0` came from `Box::into_raw` and nothing else owns it.
pub(super) struct CacheBox(*mut RuleCache);

impl std::ops::Deref for CacheBox {
    type Target = RuleCache;
    fn deref(&self) -> &RuleCache {
        // SAFETY: the type's invariant: a live box owned by this value alone.
        unsafe { &*self.0 }
    }
}

impl std::ops::DerefMut for CacheBox {
    fn deref_mut(&mut self) -> &mut RuleCache {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { &mut *self.0 }
    }
}

impl Drop for CacheBox {
    fn drop(&mut self) {
        let _guard = Guard::enter();
        // SAFETY: the type's invariant: we own the box.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

#[cfg(test)]
mod tests {
    use super::super::lookup::tests::sampled_addresses;
    use super::*;

    #[test]
    fn two_addresses_that_hash_to_one_set_are_both_kept() {
        let (_, addresses) = sampled_addresses();
        let set_of = |a: u64| (a as u32).wrapping_mul(0x9e37_79b1) >> 23;
        let mut first_in_set = std::collections::HashMap::new();
        let (a, b) = addresses
            .iter()
            .find_map(|&b| {
                let a = *first_in_set.entry(set_of(b)).or_insert(b);
                (a != b).then_some((a, b))
            })
            .expect("some two addresses share a set");
        let mut cache = RuleCache::new();
        let RuleCache { entries, state } = &mut cache;
        let entries: &mut [Entry; RULE_SLOTS] = entries;
        let (rule_a, rule_b) = (*rule(entries, state, a), *rule(entries, state, b));
        // Alternating between them (as one stack holding both does) never evicts either.
        for _ in 0..3 {
            state.checked = None;
            assert_eq!(*rule(entries, state, a), rule_a);
            assert_eq!(*rule(entries, state, b), rule_b);
            let set = set_of(a) as usize * 2;
            let mut kept = [entries[set].address, entries[set + 1].address];
            kept.sort_unstable();
            assert_eq!(kept, [a.min(b), a.max(b)]);
        }
    }
}
