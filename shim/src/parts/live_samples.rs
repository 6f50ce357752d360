//! Live samples: every sampled allocation not yet freed, by address, in 64 shards.
//!
//! Each shard sits behind a [`FutexMutex`] (it never allocates). A shard
//! allocates only while its lock is held *and* the thread is inside the re-entrancy guard, so
//! those allocations go straight to the inner allocator and never come back here.

use jeprof_dumpfmt::math::{self, SampleWeight};
use jeprof_dumpfmt::Estimate;

use crate::base::hash::{Map, MIX};
use crate::base::sync::{CacheLine, FutexMutex};

/// One live sampled allocation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveSample {
    /// jemalloc's usable size (what the profile reports).
    pub(crate) usable: usize,
    /// Index into the stack table.
    pub(crate) stack: u32,
    /// The probability it was sampled with ([`sample_probability`] of the size the program asked
    /// for and the period the thread's countdown was drawn with), kept rather than those two so
    /// that its estimate costs a division and a few products rather than an `exp`: the free of
    /// every sampled object needs it (the triggers' live figure, the peak tracker's sums), and so
    /// does every live sample in a dump.
    pub(crate) probability: f64,
    /// uid of the allocating thread.
    pub(crate) thread: u64,
    /// The scope current on the allocating thread (the scopes' id; 0: none): the free credits
    /// this scope wherever it happens.
    pub(crate) scope: u16,
}

impl LiveSample {
    /// What it stands for: probability from the *requested* size (the countdown was charged with
    /// it), bytes from the *usable* size scaled by the same weight (`docs/design.md` §2), as
    /// [`SampleWeight::of_allocation`] computes them, to the last bit, from the probability it
    /// keeps.
    #[inline]
    pub(crate) fn estimate(&self) -> Estimate {
        estimate_of(SampleWeight::of_probability(
            self.probability,
            self.usable as f64,
        ))
    }
}

/// The probability that an allocation of `requested` bytes was sampled at period `period`: what
/// [`LiveSample::probability`] holds.
pub(crate) fn sample_probability(requested: usize, period: u64) -> f64 {
    math::sample_probability(requested as f64, period as f64)
}

/// [`LiveSample::estimate`] from scratch, through the exponential.
#[cfg(test)]
pub(crate) fn sample_estimate(requested: usize, usable: usize, period: u64) -> Estimate {
    estimate_of(SampleWeight::of_allocation(
        requested as f64,
        usable as f64,
        period as f64,
    ))
}

fn estimate_of(w: SampleWeight) -> Estimate {
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
    usable: 0,
    stack: 0,
    probability: 1.0,
    thread: 0,
    scope: 0,
};

// Two records to a cache line (a shard's seven in-place records take 224 bytes, a live sample in a
// spilled map 40): the probability replaced the requested size and the period, which only served
// to compute it.
const _: () = assert!(std::mem::size_of::<LiveSample>() == 32);

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

    /// Every live sample of the shard with its address.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, &LiveSample)> + '_ {
        let in_place = self
            .addresses
            .iter()
            .zip(&self.records)
            .filter(|(&a, _)| a != 0)
            .map(|(&a, r)| (a, r));
        in_place.chain(
            self.overflow
                .iter()
                .flat_map(|map| map.iter().map(|(&a, r)| (a, r))),
        )
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
pub(crate) static LIVE: [CacheLine<FutexMutex<LiveShard>>; SHARDS] =
    [const { CacheLine(FutexMutex::new(LiveShard::new())) }; SHARDS];

/// The shard holding address `addr`.
pub(crate) fn shard_of(addr: usize) -> &'static FutexMutex<LiveShard> {
    let h = ((addr >> 4) as u64).wrapping_mul(MIX);
    &LIVE[(h >> (64 - SHARDS.trailing_zeros())) as usize].0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_keeps_every_sample_in_place_or_spilled_until_it_is_removed() {
        let mut shard = LiveShard::new();
        let record = |n: usize| LiveSample {
            usable: n,
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
                shard.remove(addr * 16).map(|r| r.usable),
                Some(addr),
                "{addr}"
            );
            assert!(shard.remove(addr * 16).is_none(), "{addr} removed twice");
        }
        for addr in n + 1..=n + 4 {
            shard.insert(addr * 16, record(addr));
        }
        let mut left: Vec<usize> = shard.samples().map(|r| r.usable).collect();
        left.sort_unstable();
        let want: Vec<usize> = (2..=n).step_by(2).chain(n + 1..=n + 4).collect();
        assert_eq!(left, want);
        assert_eq!(shard.len(), want.len());
    }

    #[test]
    fn a_shards_lock_and_in_place_addresses_share_one_cache_line() {
        let shard = &LIVE[SHARDS - 1];
        let start = shard as *const CacheLine<FutexMutex<LiveShard>> as usize;
        assert_eq!(start % 64, 0);
        let guard = shard.lock();
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

    #[test]
    fn a_records_estimate_from_its_kept_probability_is_the_sample_estimate_to_the_last_bit() {
        let periods = [1u64, 4096, 65_536, 524_288, 1 << 40];
        let sizes = [1usize, 8, 24, 1000, 4097, 65_536, 1 << 20, 1 << 34];
        for period in periods {
            for requested in sizes {
                let usable = requested.next_power_of_two() + requested / 3;
                let record = LiveSample {
                    usable,
                    probability: sample_probability(requested, period),
                    ..NO_SAMPLE
                };
                let (kept, fresh) = (
                    record.estimate(),
                    sample_estimate(requested, usable, period),
                );
                let bits = |e: &Estimate| {
                    [e.objects, e.bytes, e.objects_variance, e.bytes_variance].map(f64::to_bits)
                };
                assert_eq!(bits(&kept), bits(&fresh), "{requested} {usable} {period}");
            }
        }
    }
}
