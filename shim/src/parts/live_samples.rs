//! Live samples: every sampled allocation not yet freed, by address, in 64 shards.
//!
//! Each shard sits behind a `std::sync::Mutex` (futex-based on Linux: it never allocates). A shard
//! allocates only while its lock is held *and* the thread is inside the re-entrancy guard, so
//! those allocations go straight to the inner allocator and never come back here.

use std::sync::Mutex;

use jeprof_dumpfmt::math::SampleWeight;
use jeprof_dumpfmt::Estimate;

use crate::base::hash::{Map, MIX};
use crate::base::sync::CacheLine;

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
    /// The estimated bytes the process-wide live and allocated figures counted for this sample
    /// (in what was the record's padding): its free subtracts exactly this, without recomputing
    /// the weight (an `exp` on every sampled free).
    pub(crate) counted_bytes: f32,
    /// uid of the allocating thread.
    pub(crate) thread: u64,
    /// The scope current on the allocating thread (the scopes' id; 0: none): the free credits
    /// this scope wherever it happens.
    pub(crate) scope: u16,
}

impl LiveSample {
    pub(crate) fn estimate(&self) -> Estimate {
        sample_estimate(self.requested, self.usable, self.period)
    }
}

/// What one sample stands for: probability from the *requested* size (the countdown was charged
/// with it), bytes from the *usable* size scaled by the same weight (`docs/design.md` §2), as
/// [`SampleWeight::of_allocation`] computes it.
pub(crate) fn sample_estimate(requested: usize, usable: usize, period: u64) -> Estimate {
    let w = SampleWeight::of_allocation(requested as f64, usable as f64, period as f64);
    Estimate {
        objects: w.objects,
        bytes: w.bytes,
        objects_variance: w.objects_variance,
        bytes_variance: w.bytes_variance,
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
    counted_bytes: 0.0,
    thread: 0,
    scope: 0,
};

// The counted bytes fit in what was padding; the scope id took the record from 40 bytes to 48
// (a shard's seven in-place records from 280 bytes to 336, a live sample in a spilled map from 48
// to 56): no field had spare bits without narrowing the thread uid or the period.
const _: () = assert!(std::mem::size_of::<LiveSample>() == 48);

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

    /// Forgets the sample at `addr` and returns its record; `None` if there was none.
    pub(crate) fn remove(&mut self, addr: usize) -> Option<LiveSample> {
        match self.addresses.iter().position(|&a| a == addr) {
            Some(i) => {
                self.addresses[i] = 0;
                Some(self.records[i])
            }
            None => self.overflow.as_mut().and_then(|map| map.remove(&addr)),
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

/// Live samples by address, sharded so that frees on different threads rarely meet; each shard
/// starts a cache line, so that threads using different shards do not share lines.
pub(crate) static LIVE: [CacheLine<Mutex<LiveShard>>; SHARDS] =
    [const { CacheLine(Mutex::new(LiveShard::new())) }; SHARDS];

/// The shard holding address `addr`.
pub(crate) fn shard_of(addr: usize) -> &'static Mutex<LiveShard> {
    let h = ((addr >> 4) as u64).wrapping_mul(MIX);
    &LIVE[(h >> (64 - SHARDS.trailing_zeros())) as usize].0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::lock;

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
            assert_eq!(
                shard.remove(addr * 16).map(|r| r.requested),
                Some(addr),
                "{addr}"
            );
            assert!(shard.remove(addr * 16).is_none(), "{addr} removed twice");
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
