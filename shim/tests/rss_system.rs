//! Residency without jemalloc: in front of the system allocator the dump still carries each
//! site's resident bytes, and no stranded slab space (jemalloc's per-bin figures would describe
//! only the profiler's sampled arena).

use jeprof_shim::jeprof_dumpfmt::rss::RssFigures;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<std::alloc::System> =
    jeprof_shim::Profiled::new(std::alloc::System);

const BLOCK: usize = 1 << 20;
const BLOCKS: usize = 16;

#[test]
fn behind_the_system_allocator_residency_is_read_and_stranded_space_is_absent() {
    // A period far below the block size: every block is sampled (p = 1 − e^−256).
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    let touched: Vec<Vec<u8>> = (0..BLOCKS).map(|_| vec![1u8; BLOCK]).collect();
    let untouched: Vec<Vec<u8>> = (0..BLOCKS).map(|_| Vec::with_capacity(BLOCK)).collect();
    let profile = jeprof_shim::snapshot();
    let rss = RssFigures::from_annotations(&profile.annotations)
        .unwrap()
        .expect("rss annotations");
    assert!(rss.pagemap.is_ok(), "{:?}", rss.pagemap);
    assert!(rss.slabs.is_none(), "{:?}", rss.slabs);
    assert!(rss.sites.iter().all(|s| s.stranded.is_none()));
    let resident: f64 = rss.sites.iter().map(|s| s.resident.bytes).sum();
    let inuse = profile.totals().inuse.bytes;
    // The touched blocks are resident, the reserved ones in use but not: resident is about half
    // of what the two sites hold (the rest of the heap is the harness's, a few KiB).
    let held = (2 * BLOCKS * BLOCK) as f64;
    assert!(inuse >= held, "{inuse}");
    assert!(
        resident >= (BLOCKS * BLOCK) as f64 && resident < 0.6 * held,
        "resident {resident}, in use {inuse}"
    );
    std::hint::black_box((touched, untouched));
}
