//! Scopes: interned labels and each scope's allocated-since-start estimate.
//!
//! A scope is a label (a query, a tenant, a module) that allocations are charged to while it is
//! current on the allocating thread. Labels are interned once into a small id (`u16`, which fits
//! in the thread state's padding and in a live sample's record), so passing one costs nothing on
//! the allocation path and the sampled path stores two bytes. The table is bounded
//! ([`MAX_SCOPES`]): a label past the bound is not interned, its allocations are charged to no
//! scope, and the refusal is counted ([`dropped`]). Id 0 is "no scope".
//!
//! Live figures per scope are not kept here: they are the sum of the live samples carrying the
//! scope's id, computed when asked, so a sampled free costs nothing more than before and memory
//! moved between scopes is credited to the scope that allocated it wherever it is freed. What
//! cannot be recomputed from the live samples (what was allocated and freed since start) is kept
//! per scope here, in atomics added to once per sample (no lock, so none for a fork to inherit).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use jeprof_dumpfmt::Estimate;

use crate::base::hash::MIX;
use crate::base::sync::lock;

/// The number of scope ids, "no scope" included: at most 4,095 distinct labels per process.
/// Bounded so that the tables below are static (about 250 KiB together) and never allocate on
/// the sampled path.
pub(crate) const MAX_SCOPES: usize = 4096;

/// Slots of the open-addressed index from a label's hash to its id: twice the ids, so a probe
/// ends quickly even when the table is full.
const INDEX_SLOTS: usize = 2 * MAX_SCOPES;

/// Labels by id, and the index that finds a label's id.
pub(crate) struct Names {
    /// `labels[id]` for every interned id (`labels[0]`, "no scope", stays `None`).
    labels: [Option<&'static str>; MAX_SCOPES],
    /// Ids by hash of the label, linear probing; 0 marks an empty slot.
    index: [u16; INDEX_SLOTS],
    /// Ids handed out so far, "no scope" included.
    len: usize,
}

/// Taken only with no other profiler lock held, and nothing but the inner allocator is called
/// under it (a new label's copy, inside the re-entrancy guard); the fork handlers hold it too.
pub(crate) static NAMES: Mutex<Names> = Mutex::new(Names::new());

/// Labels refused because the table was full.
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn label_hash(label: &str) -> usize {
    let mut h = 0u64;
    for chunk in label.as_bytes().chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(26) ^ u64::from_le_bytes(word)).wrapping_mul(MIX);
    }
    // The product's high bits are the well-mixed ones.
    (h >> 32) as usize
}

impl Names {
    const fn new() -> Names {
        Names {
            labels: [None; MAX_SCOPES],
            index: [0; INDEX_SLOTS],
            len: 1,
        }
    }

    /// The index slot holding `label`'s id, or the empty slot where it would go.
    fn slot_of(&self, label: &str) -> usize {
        let mut slot = label_hash(label) % INDEX_SLOTS;
        loop {
            let id = self.index[slot];
            if id == 0 || self.labels[id as usize] == Some(label) {
                return slot;
            }
            slot = (slot + 1) % INDEX_SLOTS;
        }
    }

    /// `label`'s id, interning it if it is new; `None` when the table is full.
    fn intern(&mut self, label: &str) -> Option<u16> {
        let slot = self.slot_of(label);
        if self.index[slot] != 0 {
            return Some(self.index[slot]);
        }
        if self.len == MAX_SCOPES {
            return None;
        }
        let id = self.len;
        self.len += 1;
        self.labels[id] = Some(Box::leak(label.into()));
        // `id < MAX_SCOPES <= u16::MAX`.
        self.index[slot] = id as u16;
        Some(id as u16)
    }

    fn find(&self, label: &str) -> Option<u16> {
        match self.index[self.slot_of(label)] {
            0 => None,
            id => Some(id),
        }
    }
}

/// The id of `label`, interning it if it is new; 0 (no scope) when the table is full, counted in
/// [`dropped`]. A new label is copied once into memory kept for the life of the process (at most
/// [`MAX_SCOPES`] of them). The caller is inside the re-entrancy guard (the copy allocates).
pub(crate) fn intern(label: &str) -> u16 {
    lock(&NAMES).intern(label).unwrap_or_else(|| {
        // Ordering: a statistics counter, read on its own.
        DROPPED.fetch_add(1, Ordering::Relaxed);
        0
    })
}

/// The label of `id`; `None` for "no scope" and for ids never handed out.
pub(crate) fn label(id: u16) -> Option<&'static str> {
    lock(&NAMES).labels.get(id as usize).copied().flatten()
}

/// The id of `label` if it was interned; it is not interned otherwise.
pub(crate) fn find(label: &str) -> Option<u16> {
    lock(&NAMES).find(label)
}

/// Every interned label with its id, in id order.
pub(crate) fn all() -> Vec<(u16, &'static str)> {
    let names = lock(&NAMES);
    (1..names.len)
        .filter_map(|id| names.labels[id].map(|l| (id as u16, l)))
        .collect()
}

/// Labels refused since start because [`MAX_SCOPES`] were already interned.
pub(crate) fn dropped() -> u64 {
    // Ordering: a statistics counter, read on its own.
    DROPPED.load(Ordering::Relaxed)
}

/// An `f64` added to atomically (its bits in an `AtomicU64`), so the sampled path takes no lock
/// for a scope's figures and a fork never finds one held.
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    const fn zero() -> AtomicF64 {
        AtomicF64(AtomicU64::new(0))
    }

    fn add(&self, x: f64) {
        // Ordering: a statistics figure, read on its own; the compare-exchange loop makes the
        // additions of concurrent samples all count.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + x).to_bits())
            });
    }

    fn get(&self) -> f64 {
        // Ordering: see `add`.
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// One scope's allocated-since-start estimate: objects, bytes and their variances.
struct Allocated([AtomicF64; 4]);

/// Per scope, the estimate of what its samples stand for since start (every sample charged to the
/// scope, freed or not), with variances. The four figures are added one by one, so a reader racing
/// a sample may see some of them with it and some without: statistics, not an invariant.
static ALLOCATED: [Allocated; MAX_SCOPES] =
    [const { Allocated([const { AtomicF64::zero() }; 4]) }; MAX_SCOPES];

/// Charges a sample's estimate to `scope`'s allocated figures.
pub(crate) fn charge(scope: u16, estimate: &Estimate) {
    if let Some(Allocated(total)) = ALLOCATED.get(scope as usize) {
        total[0].add(estimate.objects);
        total[1].add(estimate.bytes);
        total[2].add(estimate.objects_variance);
        total[3].add(estimate.bytes_variance);
    }
}

/// `scope`'s allocated figures since start.
pub(crate) fn allocated(scope: u16) -> Estimate {
    ALLOCATED
        .get(scope as usize)
        .map(|Allocated(total)| Estimate {
            objects: total[0].get(),
            bytes: total[1].get(),
            objects_variance: total[2].get(),
            bytes_variance: total[3].get(),
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_a_label_twice_gives_the_same_id_and_distinct_labels_distinct_ids() {
        let a = intern("scopes-unit-a");
        let b = intern("scopes-unit-b");
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(intern("scopes-unit-a"), a);
        assert_eq!(find("scopes-unit-b"), Some(b));
        assert_eq!(find("scopes-unit-never"), None);
        assert_eq!(label(a), Some("scopes-unit-a"));
        assert_eq!(label(0), None);
    }

    #[test]
    fn labels_past_the_bound_are_refused_and_every_interned_one_still_resolves() {
        let mut names = Box::new(Names::new());
        for n in 1..MAX_SCOPES {
            assert_eq!(names.intern(&format!("fill-{n}")), Some(n as u16));
        }
        assert_eq!(names.intern("one-too-many"), None);
        assert_eq!(names.find("one-too-many"), None);
        for n in 1..MAX_SCOPES {
            assert_eq!(names.find(&format!("fill-{n}")), Some(n as u16), "{n}");
        }
    }
}
