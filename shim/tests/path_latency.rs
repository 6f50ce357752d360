//! The `path-latency` timers (`src/latency.rs`) count every sampled allocation and every free of a
//! sampled object, and only those, from the last reset on. Without the feature this file is empty.
#![cfg(feature = "path-latency")]

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

#[test]
fn every_sampled_allocation_and_free_is_timed_and_unsampled_ones_are_not() {
    // One test in this binary, so no other test thread allocates meanwhile.
    jeprof_shim::configure("sample_rate:0,symbolize:false").unwrap();
    let mut blocks: Vec<Box<[u8; 4096]>> = Vec::with_capacity(2_000);
    jeprof_shim::reset_sampled_path_latency();
    // Sampling off: nothing is sampled, so nothing is timed.
    blocks.extend((0..1_000).map(|_| Box::new([1u8; 4096])));
    blocks.clear();
    let off = jeprof_shim::sampled_path_latency();
    assert_eq!((off.allocations, off.frees), (0, 0), "{off:?}");

    // R = 1 byte: a 4 KiB block is sampled with probability 1 − e^(−4096).
    jeprof_shim::configure("sample_rate:1").unwrap();
    let before = jeprof_shim::stats().samples_taken;
    jeprof_shim::reset_sampled_path_latency();
    blocks.extend((0..1_000).map(|_| Box::new([2u8; 4096])));
    let sampled = jeprof_shim::stats().samples_taken - before;
    blocks.clear();
    let on = jeprof_shim::sampled_path_latency();
    jeprof_shim::configure("sample_rate:0").unwrap();
    // The profiler's own allocations are never sampled and nothing was reallocated (the capacity
    // was reserved), so every sample came through `alloc` and was timed; all 1,000 were freed.
    assert!(sampled >= 1_000, "{sampled} samples");
    assert_eq!(on.allocations, sampled, "{on:?}");
    assert!(on.frees >= 1_000, "{on:?}");
    assert!(on.alloc_ns > 0.0 && on.free_ns > 0.0, "{on:?}");
    assert!(on.clock_ns >= 0.0 && on.clock_ns < on.alloc_ns, "{on:?}");
}
