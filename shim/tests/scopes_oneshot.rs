//! The failure case of counters that charge a free to the freeing task's scope: buffers allocated
//! in task A, sent through a `oneshot`, dropped in task B. Sampled attribution charges them to A
//! while B holds them, charges B nothing, and returns A to zero (no underflow) when B drops them.

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const PERIOD: u64 = 4096;
const BUFFERS: usize = 2000;
const SIZE: usize = 4096;

fn figures(label: &str) -> Option<jeprof_shim::ScopeStats> {
    jeprof_shim::scopes().into_iter().find(|s| s.label == label)
}

#[test]
fn memory_sent_from_one_task_to_another_stays_charged_to_the_allocating_scope() {
    jeprof_shim::configure("symbolize:false").unwrap();
    jeprof_shim::set_sample_rate(PERIOD);
    jeprof_shim::reseed(17);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    // Made outside both scopes, so that the channels' own allocations are no one's.
    let (to_b, from_a) = tokio::sync::oneshot::channel::<Vec<Vec<u8>>>();
    let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let mut outgoing = Vec::with_capacity(BUFFERS);
    let a = jeprof_shim::scope("task-a", async move {
        for i in 0..BUFFERS {
            outgoing.push(vec![i as u8; SIZE]);
        }
        to_b.send(outgoing).unwrap();
    });
    let b = jeprof_shim::scope("task-b", async move {
        let buffers = from_a.await.unwrap();
        held_tx.send(()).unwrap();
        release_rx.await.unwrap();
        drop(buffers);
    });
    runtime.block_on(async {
        let a = tokio::spawn(a);
        let b = tokio::spawn(b);
        a.await.unwrap();
        held_rx.await.unwrap();

        // B holds A's buffers: A is charged for them, B for nothing.
        let truth = (BUFFERS * SIZE) as f64;
        let in_a = figures("task-a").expect("task-a sampled");
        let (lo, hi) = in_a.live_bytes_interval;
        println!(
            "task-a while B holds its buffers: {:.0} bytes, [{lo:.0}, {hi:.0}], truth {truth}",
            in_a.live.bytes
        );
        // √(R/T) ≈ 3.5% relative standard deviation: 5 of them either side.
        assert!(
            (in_a.live.bytes / truth - 1.0).abs() < 0.18,
            "task-a's live estimate {} vs {truth}",
            in_a.live.bytes
        );
        assert!(in_a.allocated.bytes >= in_a.live.bytes);
        let in_b = figures("task-b");
        assert!(
            in_b.as_ref().is_none_or(|b| b.live_samples == 0),
            "task-b charged for memory it only received: {in_b:?}"
        );

        release_tx.send(()).unwrap();
        b.await.unwrap();
    });

    // B dropped them: A is back to exactly zero, and nothing went negative anywhere.
    let in_a = figures("task-a").expect("task-a keeps its allocated figures");
    assert_eq!(in_a.live_samples, 0);
    assert_eq!(in_a.live.bytes, 0.0);
    for scope in jeprof_shim::scopes() {
        assert!(
            scope.live.bytes >= 0.0 && scope.live.objects >= 0.0,
            "{scope:?}"
        );
    }

    // The periodic report sees the same figures, and stops when its handle is dropped.
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    let reporter = jeprof_shim::scope_report(Duration::from_millis(5), move |scopes| {
        let a = scopes.iter().find(|s| s.label == "task-a");
        assert_eq!(a.map(|a| a.live_samples), Some(0), "task-a reported");
        counted.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::Relaxed) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(reporter);
    let after_stop = calls.load(Ordering::Relaxed);
    assert!(after_stop >= 3, "{after_stop} reports in 10 s");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(calls.load(Ordering::Relaxed), after_stop);
}
