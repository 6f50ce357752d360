//! Allocations made while a thread exits (in thread-local destructors) and allocations freed on
//! another thread after their thread is gone are sampled and accounted like any other.

use std::cell::RefCell;
use std::sync::Mutex;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

static HANDED_OVER: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

struct AllocatesOnDrop;

impl Drop for AllocatesOnDrop {
    fn drop(&mut self) {
        // Runs during thread-local destruction: allocate, free some, hand the rest over.
        let blocks: Vec<Vec<u8>> = (0..500).map(|i| vec![3u8; 256 + i]).collect();
        let (keep, free): (Vec<_>, Vec<_>) = blocks
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        drop(free);
        HANDED_OVER
            .lock()
            .unwrap()
            .extend(keep.into_iter().map(|(_, b)| b));
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<AllocatesOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn allocations_during_thread_exit_are_sampled_and_freed_elsewhere() {
    jeprof_shim::configure("sample_rate:64,symbolize:false").unwrap();
    // Warm-up: the handover vector's own buffer, the arena, the tables.
    HANDED_OVER.lock().unwrap().reserve(10_000);
    let baseline = jeprof_shim::stats();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                ON_EXIT.with(|slot| *slot.borrow_mut() = Some(AllocatesOnDrop));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let during = jeprof_shim::stats();
    // 4 threads × 500 blocks of ≥ 256 B at R = 64 B: nearly every block is sampled.
    assert!(
        during.samples_taken - baseline.samples_taken >= 1_500,
        "{baseline:?} {during:?}"
    );
    assert!(during.live_samples >= baseline.live_samples + 900);
    let profile = jeprof_shim::snapshot();
    assert!(
        profile.threads.len() >= 4,
        "per-thread lines for the exited threads"
    );
    // Free, on this thread, what the exited threads left behind.
    HANDED_OVER.lock().unwrap().clear();
    let after = jeprof_shim::stats();
    println!(
        "live samples: baseline {}, with the exited threads' blocks {}, after freeing {}",
        baseline.live_samples, during.live_samples, after.live_samples
    );
    assert_eq!(after.live_samples, baseline.live_samples);
    assert_eq!(after.dropped.total(), 0);
}
