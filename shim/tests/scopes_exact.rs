//! Exact attribution ([`jeprof_shim::ExactScopes`] around `Profiled`): memory sent from one task to
//! another stays charged to the allocating scope and returns it to exactly zero; 10,000 tasks
//! moving buffers between 16 scopes are counted exactly; blocks of every alignment keep their
//! alignment and their scope through `realloc`; 1,000,000 short scopes whose memory outlives them
//! leave no growth behind.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static ALLOC: jeprof_shim::ExactScopes<jeprof_shim::Profiled<tikv_jemallocator::Jemalloc>> =
    jeprof_shim::ExactScopes::new(jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc));

fn exact(label: &str) -> (i64, i64) {
    jeprof_shim::exact_scopes()
        .into_iter()
        .find(|s| s.label == label)
        .map_or((0, 0), |s| (s.live_bytes, s.live_objects))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap()
}

fn oneshot_between_tasks() {
    const BUFFERS: usize = 100;
    const SIZE: usize = 1000;
    let runtime = runtime();
    let (to_b, from_a) = tokio::sync::oneshot::channel::<Vec<Vec<u8>>>();
    let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let mut outgoing = Vec::with_capacity(BUFFERS);
    let a = jeprof_shim::scope("exact-a", async move {
        for i in 0..BUFFERS {
            outgoing.push(vec![i as u8; SIZE]);
        }
        to_b.send(outgoing).unwrap();
    });
    let b = jeprof_shim::scope("exact-b", async move {
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
        assert_eq!(exact("exact-a"), ((BUFFERS * SIZE) as i64, BUFFERS as i64));
        assert_eq!(exact("exact-b"), (0, 0));
        release_tx.send(()).unwrap();
        b.await.unwrap();
    });
    assert_eq!(exact("exact-a"), (0, 0));
    assert_eq!(exact("exact-b"), (0, 0));
}

fn ten_thousand_tasks_are_counted_exactly() {
    const TASKS: usize = 10_000;
    const SCOPES: usize = 16;
    const SIZES: [usize; 5] = [24, 100, 256, 1000, 4000];
    let size_of = |task: usize, k: usize| SIZES[(task * 7 + k * 3) % SIZES.len()];
    let label = |s: usize| format!("exact-{s}");
    let scopes: Vec<jeprof_shim::Scope> = (0..SCOPES)
        .map(|s| jeprof_shim::Scope::new(&label(s)))
        .collect();
    let mut truth = [0i64; SCOPES];
    for task in 0..TASKS {
        for k in 0..4 {
            truth[task % SCOPES] += size_of(task, k) as i64;
        }
    }
    let runtime = runtime();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..TASKS)
        .map(|_| tokio::sync::oneshot::channel::<Vec<Vec<u8>>>())
        .unzip();
    let mut senders: Vec<_> = senders.into_iter().map(Some).collect();
    let held = runtime.block_on(async {
        let mut handles = Vec::with_capacity(TASKS);
        for (task, from_previous) in receivers.into_iter().enumerate() {
            let to_next = senders[(task + 1) % TASKS].take().unwrap();
            let mut kept: Vec<Vec<u8>> = Vec::with_capacity(4);
            let mut sent: Vec<Vec<u8>> = Vec::with_capacity(2);
            let work = async move {
                for k in 0..4 {
                    let buffer = vec![k as u8; size_of(task, k)];
                    if k % 2 == 0 {
                        kept.push(buffer);
                    } else {
                        sent.push(buffer);
                    }
                    tokio::task::yield_now().await;
                }
                to_next.send(sent).unwrap();
                let received = from_previous.await.unwrap();
                (kept, received)
            };
            handles.push(tokio::spawn(jeprof_shim::scope(
                scopes[task % SCOPES],
                work,
            )));
        }
        let mut held = Vec::with_capacity(2 * TASKS);
        for handle in handles {
            let (kept, received) = handle.await.unwrap();
            held.push(kept);
            held.push(received);
        }
        held
    });
    let during: Vec<i64> = (0..SCOPES).map(|s| exact(&label(s)).0).collect();
    drop(held);
    // The runtime's own buffers grown inside a task's poll (and kept) are that scope's too: the
    // difference between holding the buffers and not is exactly what each scope allocated.
    for s in 0..SCOPES {
        let after = exact(&label(s)).0;
        assert_eq!(during[s] - after, truth[s], "{}", label(s));
        assert!(
            (0..truth[s] / 100).contains(&after),
            "{}: {after} bytes left of {}",
            label(s),
            truth[s]
        );
    }
}

fn every_alignment_keeps_its_alignment_and_realloc_keeps_the_scope() {
    let a = jeprof_shim::Scope::new("exact-align-a");
    let b = jeprof_shim::Scope::new("exact-align-b");
    let mut blocks = Vec::with_capacity(17 * 5);
    for shift in 0..=16 {
        let align = 1usize << shift;
        for size in [1usize, 7, 16, 100, 5000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let ptr = {
                let _in_a = a.enter();
                // SAFETY: non-zero size.
                unsafe { ALLOC.alloc(layout) }
            };
            assert!(!ptr.is_null());
            assert_eq!(ptr as usize % align, 0, "align {align} size {size}");
            // SAFETY: ptr is valid for size bytes.
            unsafe { ptr.write_bytes(0xAB, size) };
            blocks.push((ptr, layout));
        }
    }
    let total: usize = blocks.iter().map(|(_, l)| l.size()).sum();
    assert_eq!(exact("exact-align-a"), (total as i64, blocks.len() as i64));
    // Grow every block in scope b: the growth is a's, b is charged nothing.
    let mut grown = Vec::with_capacity(blocks.len());
    for (ptr, layout) in blocks {
        let new = {
            let _in_b = b.enter();
            // SAFETY: ptr was allocated with layout; the new size is non-zero.
            unsafe { ALLOC.realloc(ptr, layout, layout.size() * 3) }
        };
        assert!(!new.is_null());
        assert_eq!(new as usize % layout.align(), 0);
        // SAFETY: the first bytes were copied.
        assert_eq!(unsafe { new.read() }, 0xAB);
        grown.push((
            new,
            Layout::from_size_align(layout.size() * 3, layout.align()).unwrap(),
        ));
    }
    assert_eq!(
        exact("exact-align-a"),
        (3 * total as i64, grown.len() as i64)
    );
    assert_eq!(exact("exact-align-b"), (0, 0));
    for (ptr, layout) in grown {
        // SAFETY: allocated (reallocated) with this layout.
        unsafe { ALLOC.dealloc(ptr, layout) };
    }
    assert_eq!(exact("exact-align-a"), (0, 0));
}

fn a_million_short_scopes_leave_nothing_behind() {
    use tikv_jemalloc_ctl::{epoch, stats};
    let labels: Vec<jeprof_shim::Scope> = (0..8)
        .map(|i| jeprof_shim::Scope::new(&format!("exact-short-{i}")))
        .collect();
    // Each scope's block outlives it: it is freed 1,000 scopes later, from no scope.
    let mut ring: Vec<Option<Box<[u8; 64]>>> = (0..1000).map(|_| None).collect();
    let allocated = || {
        epoch::advance().unwrap();
        stats::allocated::read().unwrap()
    };
    let mut at_100k = 0;
    for i in 0..1_000_000usize {
        let block = jeprof_shim::scope_sync(labels[i % 8], || Box::new([i as u8; 64]));
        ring[i % 1000] = Some(block);
        if i == 100_000 {
            at_100k = allocated();
        }
    }
    let at_1m = allocated();
    assert!(
        at_1m <= at_100k + (64 << 10),
        "allocated grew from {at_100k} to {at_1m} over 900,000 short scopes"
    );
    drop(ring);
    for i in 0..8 {
        assert_eq!(exact(&format!("exact-short-{i}")), (0, 0));
    }
}

#[test]
fn exact_scopes_charge_the_allocating_scope_exactly_for_every_layout_and_leak_nothing() {
    jeprof_shim::configure("symbolize:false").unwrap();
    oneshot_between_tasks();
    ten_thousand_tasks_are_counted_exactly();
    every_alignment_keeps_its_alignment_and_realloc_keeps_the_scope();
    a_million_short_scopes_leave_nothing_behind();
}
