//! Heap sampling, snapshots and dumps keep working, with no deadlock or crash, while a
//! SIGPROF-based CPU profiler (pprof-rs, unwinding with libgcc inside its signal handler) samples
//! the same process at 1 kHz. One child process per shim unwinder (`fp`, `backtrace`), each under
//! a deadline: a child still running after it is killed and fails the test as a deadlock.

use std::hint::black_box;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// How long each child runs its workload under the CPU profiler.
const RUN: Duration = Duration::from_secs(4);
/// A child still running this long after it started is deadlocked.
const DEADLINE: Duration = Duration::from_secs(90);

#[inline(never)]
fn allocate_and_free(round: u64) -> usize {
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(64);
    let mut total = 0;
    for i in 0..64u64 {
        let v = vec![(round + i) as u8; 64 + ((round * 64 + i) % 8192) as usize];
        total += v.len();
        kept.push(v);
    }
    black_box(&kept);
    total
}

/// The child: allocating threads, a thread taking snapshots, dumps and pprof profiles, all while
/// pprof-rs interrupts them at 1 kHz; then checks that both profilers saw something.
fn child(unwinder: &str) {
    jeprof_shim::configure(&format!("unwinder:{unwinder},sample_rate:4096")).unwrap();
    let cpu = pprof::ProfilerGuardBuilder::default()
        .frequency(1000)
        .build()
        .expect("pprof-rs starts");
    let stop = Arc::new(AtomicBool::new(false));
    let dumps = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for t in 0..3u64 {
        let stop = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || {
            let mut round = t << 32;
            // Ordering: a stop flag, nothing published through it.
            while !stop.load(Ordering::Relaxed) {
                black_box(allocate_and_free(round));
                round += 1;
            }
        }));
    }
    {
        let (stop, dumps) = (Arc::clone(&stop), Arc::clone(&dumps));
        threads.push(std::thread::spawn(move || {
            // Ordering: as above.
            while !stop.load(Ordering::Relaxed) {
                let mut sink = Vec::new();
                jeprof_shim::dump_to(&mut sink).expect("dump");
                let pb = jeprof_shim::pprof(&jeprof_shim::PprofOptions::default());
                assert!(!sink.is_empty() && !pb.sample.is_empty());
                // Ordering: a counter read after the joins.
                dumps.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    while start.elapsed() < RUN {
        black_box(allocate_and_free(start.elapsed().as_nanos() as u64));
    }
    // Ordering: see the loops.
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let report = cpu.report().build_unresolved().expect("pprof-rs report");
    let cpu_samples: isize = report.data.values().sum();
    let stats = jeprof_shim::stats();
    println!(
        "child unwinder:{unwinder}: {cpu_samples} CPU samples, {} heap samples, {} dumps",
        stats.samples_taken,
        // Ordering: after the joins.
        dumps.load(Ordering::Relaxed)
    );
    assert!(
        cpu_samples > 100,
        "the CPU profiler hardly sampled: {cpu_samples}"
    );
    assert!(stats.samples_taken > 1000, "{stats:?}");
    // Ordering: after the joins.
    assert!(dumps.load(Ordering::Relaxed) > 0);
}

fn main() {
    if let Ok(unwinder) = std::env::var("COEXISTENCE_CHILD") {
        return child(&unwinder);
    }
    let exe = std::env::current_exe().unwrap();
    for unwinder in ["fp", "backtrace"] {
        let mut child = jeprof_conformance::target_command(&exe)
            .env("COEXISTENCE_CHILD", unwinder)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!("unwinder:{unwinder}: deadlocked next to the CPU profiler ({DEADLINE:?})");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.success(),
            "unwinder:{unwinder}: the child failed: {status}"
        );
    }
    println!("ok");
}
