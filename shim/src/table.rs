//! The profiler's shared tables: interned stacks and live samples by address.
//!
//! Both sit behind `std::sync::Mutex` (futex-based on Linux: it never allocates). The tables
//! themselves allocate only while their lock is held *and* the thread is inside the re-entrancy
//! guard, so those allocations go straight to the inner allocator and never come back here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard};

use jeprof_dumpfmt::Estimate;

/// A cheap multiplicative hasher for addresses and stack hashes (keys are not attacker-chosen).
#[derive(Default)]
pub(crate) struct WordHasher(u64);

const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // A product's low bits depend only on the factors' low bits, and sampled addresses are
        // 16-aligned or more: fold the well-mixed high half into the low bits hashbrown indexes
        // with (its 7-bit tags come from the top bits, which stay as they are).
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(26) ^ x).wrapping_mul(MIX);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

pub(crate) type Map<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// One live sampled allocation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveSample {
    /// Size the program asked for (what the sampling probability depends on).
    pub(crate) requested: usize,
    /// jemalloc's usable size (what the profile reports).
    pub(crate) usable: usize,
    /// The period R the thread's countdown was drawn with.
    pub(crate) period: u64,
    /// Index into the stack table.
    pub(crate) stack: u32,
    /// uid of the allocating thread.
    pub(crate) thread: u64,
    /// A label for per-scope attribution (0 = none). Written on every sample, read by the
    /// per-task attribution that a later issue adds.
    #[allow(dead_code)]
    pub(crate) scope: u64,
}

impl LiveSample {
    pub(crate) fn estimate(&self) -> Estimate {
        sample_estimate(self.requested, self.usable, self.period)
    }
}

/// What one sample stands for: probability from the *requested* size (the countdown was charged
/// with it), bytes from the *usable* size scaled by the same weight (`design-notes.md` §2):
/// `objects = 1/p`, `bytes = usable/p`, variances `(1 − p)/p²` and `usable²(1 − p)/p²`.
pub(crate) fn sample_estimate(requested: usize, usable: usize, period: u64) -> Estimate {
    let p = jeprof_dumpfmt::math::sample_probability(requested as f64, period as f64);
    let objects = 1.0 / p;
    let q = (1.0 - p) / (p * p);
    let usable = usable as f64;
    Estimate {
        objects,
        bytes: usable * objects,
        objects_variance: q,
        bytes_variance: usable * usable * q,
    }
}

/// Number of live-sample shards (a power of two).
pub(crate) const SHARDS: usize = 64;

/// Live samples a shard holds in place before it spills into a hash map: as many addresses as fit
/// in the cache line that also holds the shard's lock.
const INLINE_SAMPLES: usize = 7;

/// One shard of the live-sample table.
///
/// A sample's data is cold by the time it is freed (the program has churned through megabytes
/// since), so what a record or a removal costs is mostly the lines it touches. The first seven
/// live samples of a shard are kept in place: their addresses in the line that holds the shard's
/// lock, their records in the lines after. Removing one of them touches only that first line;
/// adding one, that line and the record's. A hash map takes the rest (a shard holds about
/// `live samples / 64`). `repr(C)` keeps the addresses first, right after the mutex's own word.
#[repr(C)]
pub(crate) struct LiveShard {
    /// Addresses of the in-place samples; 0 marks a free place (sampled addresses are never 0).
    addresses: [usize; INLINE_SAMPLES],
    records: [LiveSample; INLINE_SAMPLES],
    overflow: Option<Map<usize, LiveSample>>,
}

const NO_SAMPLE: LiveSample = LiveSample {
    requested: 0,
    usable: 0,
    period: 0,
    stack: 0,
    thread: 0,
    scope: 0,
};

impl LiveShard {
    const fn new() -> LiveShard {
        LiveShard {
            addresses: [0; INLINE_SAMPLES],
            records: [NO_SAMPLE; INLINE_SAMPLES],
            overflow: None,
        }
    }

    /// Records the live sample at `addr` (not already recorded; never 0).
    pub(crate) fn insert(&mut self, addr: usize, record: LiveSample) {
        debug_assert_ne!(addr, 0);
        match self.addresses.iter().position(|&a| a == 0) {
            Some(i) => {
                self.addresses[i] = addr;
                self.records[i] = record;
            }
            None => {
                self.overflow
                    .get_or_insert_with(|| Map::with_capacity_and_hasher(64, Default::default()))
                    .insert(addr, record);
            }
        }
    }

    /// Forgets the sample at `addr`; false if there was none.
    pub(crate) fn remove(&mut self, addr: usize) -> bool {
        match self.addresses.iter().position(|&a| a == addr) {
            Some(i) => {
                self.addresses[i] = 0;
                true
            }
            None => self
                .overflow
                .as_mut()
                .is_some_and(|map| map.remove(&addr).is_some()),
        }
    }

    /// Every live sample of the shard.
    pub(crate) fn samples(&self) -> impl Iterator<Item = &LiveSample> + '_ {
        let in_place = self
            .addresses
            .iter()
            .zip(&self.records)
            .filter(|(&a, _)| a != 0)
            .map(|(_, r)| r);
        in_place.chain(self.overflow.iter().flat_map(|map| map.values()))
    }

    /// Number of live samples.
    pub(crate) fn len(&self) -> usize {
        let in_place = self.addresses.iter().filter(|&&a| a != 0).count();
        in_place + self.overflow.as_ref().map_or(0, |map| map.len())
    }

    /// Heap bytes the shard holds (the in-place part is static).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.overflow.as_ref().map_or(0, |map| {
            map.capacity() * (std::mem::size_of::<(usize, LiveSample)>() + 1)
        })
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

/// Live samples by address, sharded so that frees on different threads rarely meet; each shard
/// starts a cache line, so that threads using different shards do not share lines.
pub(crate) static LIVE: [CacheLine<Mutex<LiveShard>>; SHARDS] =
    [const { CacheLine(Mutex::new(LiveShard::new())) }; SHARDS];

/// The shard holding address `addr`.
pub(crate) fn shard_of(addr: usize) -> &'static Mutex<LiveShard> {
    let h = ((addr >> 4) as u64).wrapping_mul(MIX);
    &LIVE[(h >> (64 - SHARDS.trailing_zeros())) as usize].0
}

/// Locks a profiler mutex, ignoring poison (nothing here panics while holding one, and a heap
/// profiler must keep working regardless).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One distinct stack.
pub(crate) struct StackRecord {
    /// Return addresses, innermost first. Never moved or freed once interned: threads keep their
    /// address in their stack caches (`accum`).
    pub(crate) frames: Box<[u64]>,
    /// Next record with the same hash (`u32::MAX`: none).
    next_same_hash: u32,
}

/// The hash a stack is interned under: four independent multiply chains over every fourth frame
/// (so the 32 or 128 multiplies of a stack overlap instead of waiting on each other), then folded
/// together with the length.
pub(crate) fn stack_hash(frames: &[u64]) -> u64 {
    let step = |lane: u64, frame: u64| (lane.rotate_left(26) ^ frame).wrapping_mul(MIX);
    let mut lanes = [
        MIX,
        MIX.rotate_left(16),
        MIX.rotate_left(32),
        MIX.rotate_left(48),
    ];
    let mut quads = frames.chunks_exact(4);
    for quad in &mut quads {
        lanes[0] = step(lanes[0], quad[0]);
        lanes[1] = step(lanes[1], quad[1]);
        lanes[2] = step(lanes[2], quad[2]);
        lanes[3] = step(lanes[3], quad[3]);
    }
    for (lane, &frame) in lanes.iter_mut().zip(quads.remainder()) {
        *lane = step(*lane, frame);
    }
    let mut h = WordHasher(frames.len() as u64);
    for lane in lanes {
        h.write_u64(lane);
    }
    h.finish()
}

/// Interned stacks. What was allocated from each is charged to the allocating thread's own table
/// (`accum`), not here.
#[derive(Default)]
pub(crate) struct StackTable {
    /// Hash of frames → first record with that hash.
    by_hash: Map<u64, u32>,
    /// Records; an index is a stack id.
    pub(crate) records: Vec<StackRecord>,
}

/// The stack table.
pub(crate) static STACKS: Mutex<Option<StackTable>> = Mutex::new(None);

impl StackTable {
    /// Finds or adds `frames` and returns its id; `None` when the stack is new and the table
    /// already holds `max_stacks` stacks.
    ///
    /// `hash` is [`stack_hash`]`(frames)`, computed by the caller before it takes the table's lock
    /// (any hash works: equal hashes with different frames are chained).
    pub(crate) fn intern(&mut self, frames: &[u64], hash: u64, max_stacks: usize) -> Option<u32> {
        let mut id = self.by_hash.get(&hash).copied().unwrap_or(u32::MAX);
        while id != u32::MAX && *self.records[id as usize].frames != *frames {
            id = self.records[id as usize].next_same_hash;
        }
        if id == u32::MAX {
            if self.records.len() >= max_stacks || self.records.len() >= u32::MAX as usize - 1 {
                return None;
            }
            id = self.records.len() as u32;
            let next_same_hash = self.by_hash.insert(hash, id).unwrap_or(u32::MAX);
            self.records.push(StackRecord {
                frames: frames.into(),
                next_same_hash,
            });
        }
        Some(id)
    }

    /// Bytes this table holds (capacity, not just length).
    pub(crate) fn metadata_bytes(&self) -> usize {
        let map = self.by_hash.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        let records = self.records.capacity() * std::mem::size_of::<StackRecord>();
        let frames: usize = self.records.iter().map(|r| r.frames.len() * 8).sum();
        map + records + frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_finds_equal_stacks_and_caps_distinct_ones() {
        let mut t = StackTable::default();
        let intern = |t: &mut StackTable, frames: &[u64]| t.intern(frames, stack_hash(frames), 2);
        let a = intern(&mut t, &[1, 2, 3]).unwrap();
        let b = intern(&mut t, &[1, 2, 4]).unwrap();
        assert_ne!(a, b);
        assert_eq!(intern(&mut t, &[1, 2, 3]), Some(a));
        assert_eq!(intern(&mut t, &[9]), None);
        assert_eq!(&*t.records[b as usize].frames, &[1, 2, 4]);
    }

    #[test]
    fn equal_hashes_with_different_frames_are_different_stacks() {
        let mut t = StackTable::default();
        // Forced collision: both interned under hash 7.
        let a = t.intern(&[1, 2], 7, 10).unwrap();
        let b = t.intern(&[3, 4], 7, 10).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.intern(&[1, 2], 7, 10), Some(a));
        assert_eq!(t.intern(&[3, 4], 7, 10), Some(b));
    }

    #[test]
    fn stack_hash_depends_on_every_frame_and_its_place() {
        let base: Vec<u64> = (0..37).map(|i| 0x5555_0000_1000 + 40 * i).collect();
        let h = stack_hash(&base);
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] += 1;
            assert_ne!(stack_hash(&changed), h, "frame {i}");
        }
        let mut swapped = base.clone();
        swapped.swap(0, 4);
        assert_ne!(stack_hash(&swapped), h);
        assert_ne!(stack_hash(&base[..36]), h);
        assert_ne!(stack_hash(&[]), stack_hash(&[0]));
    }

    #[test]
    fn a_shard_keeps_every_sample_in_place_or_spilled_until_it_is_removed() {
        let mut shard = LiveShard::new();
        let record = |n: usize| LiveSample {
            requested: n,
            ..NO_SAMPLE
        };
        let n = 3 * INLINE_SAMPLES;
        for addr in 1..=n {
            shard.insert(addr * 16, record(addr));
        }
        assert_eq!(shard.len(), n);
        // Remove every other one, in place and spilled alike, then reuse the freed places.
        for addr in (1..=n).step_by(2) {
            assert!(shard.remove(addr * 16), "{addr}");
            assert!(!shard.remove(addr * 16), "{addr} removed twice");
        }
        for addr in n + 1..=n + 4 {
            shard.insert(addr * 16, record(addr));
        }
        let mut left: Vec<usize> = shard.samples().map(|r| r.requested).collect();
        left.sort_unstable();
        let want: Vec<usize> = (2..=n).step_by(2).chain(n + 1..=n + 4).collect();
        assert_eq!(left, want);
        assert_eq!(shard.len(), want.len());
    }

    #[test]
    fn a_shards_lock_and_in_place_addresses_share_one_cache_line() {
        let shard = &LIVE[SHARDS - 1];
        let start = shard as *const CacheLine<Mutex<LiveShard>> as usize;
        assert_eq!(start % 64, 0);
        let guard = lock(shard);
        let addresses = guard.addresses.as_ptr() as usize;
        let end = addresses + std::mem::size_of_val(&guard.addresses);
        assert!(
            addresses > start && end <= start + 64,
            "{start:#x} {addresses:#x}"
        );
    }

    #[test]
    fn weight_uses_requested_size_and_reports_usable_bytes() {
        let e = sample_estimate(10, 16, 100);
        let p = 1.0 - (-10.0f64 / 100.0).exp();
        assert!((e.objects - 1.0 / p).abs() < 1e-9);
        assert!((e.bytes - 16.0 / p).abs() < 1e-9);
    }
}
