//! Every thread that allocates or frees a sampled object gets its own jemalloc tcache for the
//! sampled arena; it must be destroyed when the thread exits, or jemalloc's 4,094 explicit tcache
//! indices run out after as many threads. Its table of figures is handed on to the next new thread
//! (with the figures kept), so 5,000 threads one after another need only a handful of tables.

use std::sync::Mutex;

use tikv_jemalloc_sys as jem;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// More threads than jemalloc has explicit tcache indices (0 to `MALLOCX_TCACHE_MAX` = 4093).
const THREADS: usize = 5_000;

#[test]
fn sampled_tcaches_are_released_at_thread_exit() {
    jeprof_shim::configure("sample_rate:64,symbolize:false").unwrap();
    KEPT.lock().unwrap().reserve(THREADS * 4);
    let baseline = jeprof_shim::stats();
    for _ in 0..THREADS {
        std::thread::spawn(|| {
            // At R = 64 B nearly every one of these is sampled: the thread gets a sampled tcache,
            // frees half its blocks into it and hands the others over.
            let mut blocks: Vec<Vec<u8>> = (0..8).map(|i| vec![1u8; 512 + i]).collect();
            let keep = blocks.split_off(4);
            drop(blocks);
            KEPT.lock().unwrap().extend(keep);
        })
        .join()
        .unwrap();
    }
    let during = jeprof_shim::stats();
    assert!(
        during.samples_taken - baseline.samples_taken >= (THREADS * 6) as u64,
        "{baseline:?} {during:?}"
    );
    assert!(
        during.thread_tables <= baseline.thread_tables + 4,
        "thread tables not reused: {baseline:?} {during:?}"
    );

    // Had any thread's tcache outlived it, the index space would be exhausted by now. A new one
    // can still be created, and reuses a released index.
    let mut index: u32 = u32::MAX;
    let mut len = std::mem::size_of::<u32>();
    // SAFETY: "tcache.create" writes an unsigned of the size we state.
    let rc = unsafe {
        jem::mallctl(
            c"tcache.create".as_ptr(),
            (&mut index as *mut u32).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(rc, 0, "tcache.create failed: indices leaked");
    assert!(index < 64, "tcache index {index}: indices leaked");
    // SAFETY: "tcache.destroy" reads the unsigned index we just got, which nothing uses.
    let rc = unsafe {
        jem::mallctl(
            c"tcache.destroy".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&mut index as *mut u32).cast(),
            std::mem::size_of::<u32>(),
        )
    };
    assert_eq!(rc, 0);

    // The handed-over blocks (all but about e^-8 of them sampled), freed here, take their live
    // samples with them. (Not an exact count: at R = 64 B the test harness's own allocations on
    // its other threads are sampled too.)
    let handed_over = (THREADS * 4) as u64;
    let before_free = jeprof_shim::stats().live_samples;
    KEPT.lock().unwrap().clear();
    let after = jeprof_shim::stats().live_samples;
    let freed = before_free.saturating_sub(after);
    assert!(
        freed >= handed_over * 99 / 100 && freed <= handed_over + 8,
        "live samples {before_free} -> {after}, {handed_over} blocks freed"
    );
}
