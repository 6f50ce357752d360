//! The published synthetic workloads, run in this process so that every address is one the global
//! allocator (jemalloc, in `scheme-report` and the tests) really returned. Each run records its
//! stream into a [`Trace`]; blocks the workload "leaks" are only held until the run ends, so they
//! are live at the snapshot without leaking from this process.

use super::scheme::SplitMix64;
use super::trace::Trace;

/// A call site of a synthetic workload: its share of allocations, sizes, and how often it leaks.
struct SiteMix {
    name: &'static str,
    share: f64,
    sizes: (u64, u64),
    leak_rate: f64,
}

/// The leaky monotonic heap: `objects` allocations of 16–4096 B from four sites with different
/// size mixes, about 5% leaked (more for the sites of large objects); every other block is freed
/// after the next thousand allocations, so the heap grows by its leaks only.
pub fn leaky(objects: usize, seed: u64) -> Trace {
    const MIX: [SiteMix; 4] = [
        SiteMix {
            name: "list_node (16–64 B)",
            share: 0.5,
            sizes: (16, 64),
            leak_rate: 0.03,
        },
        SiteMix {
            name: "string (64–512 B)",
            share: 0.3,
            sizes: (64, 512),
            leak_rate: 0.05,
        },
        SiteMix {
            name: "buffer (1–4 KiB)",
            share: 0.15,
            sizes: (1024, 4096),
            leak_rate: 0.10,
        },
        SiteMix {
            name: "any (16–4096 B)",
            share: 0.05,
            sizes: (16, 4096),
            leak_rate: 0.08,
        },
    ];
    const FREED_AFTER: usize = 1000;
    let mut rng = SplitMix64::new(seed);
    let mut trace = Trace::default();
    let sites: Vec<u32> = MIX.iter().map(|m| trace.add_site(m.name)).collect();
    let mut leaked: Vec<Vec<u8>> = Vec::new();
    let mut pending: std::collections::VecDeque<(u32, Vec<u8>)> = Default::default();
    for _ in 0..objects {
        let mut pick = rng.unit();
        let which = MIX
            .iter()
            .position(|m| {
                pick -= m.share;
                pick <= 0.0
            })
            .unwrap_or(MIX.len() - 1);
        let mix = &MIX[which];
        let size = rng.between(mix.sizes.0, mix.sizes.1);
        let block: Vec<u8> = Vec::with_capacity(size as usize);
        let index = trace.alloc(block.as_ptr() as u64, size, sites[which]);
        if rng.unit() <= mix.leak_rate {
            leaked.push(block);
        } else {
            pending.push_back((index, block));
            if pending.len() > FREED_AFTER {
                let (old, block) = pending.pop_front().expect("non-empty");
                drop(block);
                trace.free(old);
            }
        }
    }
    for (old, block) in pending {
        drop(block);
        trace.free(old);
    }
    drop(leaked);
    trace
}

/// High reuse: `slots` hot slots, each of a fixed size, freed and reallocated `iterations` times
/// in random order, so the allocator hands the same few addresses out again and again; two leak
/// sites allocate a block every `iterations / leaks_per_site` rounds that stays live.
pub fn high_reuse(slots: usize, iterations: usize, leaks_per_site: usize, seed: u64) -> Trace {
    let mut rng = SplitMix64::new(seed);
    let mut trace = Trace::default();
    let small = trace.add_site("hot_small (32–256 B)");
    let large = trace.add_site("hot_large (1–4 KiB)");
    let leak_session = trace.add_site("leak_session (256–1024 B)");
    let leak_buffer = trace.add_site("leak_buffer (1–4 KiB)");
    let small_slots = slots * 6 / 10;
    let mut hot: Vec<(u32, u64, u32, Vec<u8>)> = (0..slots)
        .map(|i| {
            let (site, size) = if i < small_slots {
                (small, rng.between(32, 256))
            } else {
                (large, rng.between(1024, 4096))
            };
            let block = Vec::with_capacity(size as usize);
            let index = trace.alloc(block.as_ptr() as u64, size, site);
            (site, size, index, block)
        })
        .collect();
    let mut leaked: Vec<Vec<u8>> = Vec::new();
    let leak_every = (iterations / leaks_per_site.max(1)).max(1);
    for round in 0..iterations {
        let slot = &mut hot[rng.next_u64() as usize % slots];
        let (site, size) = (slot.0, slot.1);
        drop(std::mem::take(&mut slot.3));
        trace.free(slot.2);
        slot.3 = Vec::with_capacity(size as usize);
        slot.2 = trace.alloc(slot.3.as_ptr() as u64, size, site);
        if round % leak_every == leak_every / 2 {
            for (site, sizes) in [(leak_session, (256, 1024)), (leak_buffer, (1024, 4096))] {
                let size = rng.between(sizes.0, sizes.1);
                let block: Vec<u8> = Vec::with_capacity(size as usize);
                trace.alloc(block.as_ptr() as u64, size, site);
                leaked.push(block);
            }
        }
    }
    drop(hot);
    drop(leaked);
    trace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaky_heap_leaks_about_five_percent_of_its_objects() {
        let trace = leaky(20_000, 1);
        let frees = trace
            .events
            .iter()
            .filter(|e| matches!(e, super::super::trace::Event::Free(_)))
            .count();
        let leaked = 20_000 - frees;
        assert!((700..1300).contains(&leaked), "{leaked} leaked of 20,000");
    }

    #[test]
    fn high_reuse_keeps_its_hot_slots_and_leaks_live() {
        let trace = high_reuse(100, 10_000, 20, 2);
        let frees = trace
            .events
            .iter()
            .filter(|e| matches!(e, super::super::trace::Event::Free(_)))
            .count();
        assert_eq!(trace.allocations.len(), 100 + 10_000 + 2 * 20);
        assert_eq!(trace.allocations.len() - frees, 100 + 2 * 20);
        let truth = trace.truth();
        assert!(truth.live_bytes[2] > 0.0 && truth.live_bytes[3] > 0.0);
    }
}
