//! Eight threads allocate, free on other threads and realloc while another thread dumps in a loop
//! and one forks (each child allocates and dumps): no crash, no deadlock (a watchdog bounds the
//! run), and the live-sample count returns to its baseline once everything is freed.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const WORKERS: usize = 8;
const ROUNDS: usize = 6_000;
const FORKS: usize = 8;

/// The child being waited for, 0 when none: the watchdog kills it, since a deadlocked child
/// would otherwise outlive the test.
static CHILD: AtomicI32 = AtomicI32::new(0);

fn watchdog(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        // Ordering: the pid only. The forker clears it before it reaps the child, so the pid
        // cannot have been reused by another process.
        let child = CHILD.load(Ordering::SeqCst);
        eprintln!("stress_fork: still running after {limit:?}: deadlock (child {child})");
        if child > 0 {
            // SAFETY: kill has no memory effects; the pid is our unreaped child's.
            unsafe { libc::kill(child, libc::SIGKILL) };
        }
        // SAFETY: _exit ends the process at once without running exit handlers (which could
        // block on the very locks that deadlocked).
        unsafe { libc::_exit(3) };
    });
}

/// One worker: allocates blocks of varied sizes, grows and shrinks some (realloc), sends half to
/// the next worker and frees what it receives.
fn worker(id: usize, to_next: mpsc::Sender<Vec<u8>>, from_prev: mpsc::Receiver<Vec<u8>>) {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    for round in 0..ROUNDS {
        let size = 16 + (round * 7919 + id * 104_729) % 16_384;
        let mut v = vec![id as u8; size];
        match round % 4 {
            0 => v.reserve(size * 2),
            1 => {
                v.truncate(size / 3);
                v.shrink_to_fit();
            }
            _ => {}
        }
        if round % 2 == 0 {
            let _ = to_next.send(v);
        } else {
            kept.push(v);
        }
        while let Ok(received) = from_prev.try_recv() {
            black_box(&received);
        }
        if kept.len() > 64 {
            kept.drain(..32);
        }
    }
    drop(to_next);
    // Drain until the previous worker hangs up.
    for received in from_prev {
        black_box(&received);
    }
}

/// Forks; the child allocates, dumps to `path` and exits 0 (1 on a failed dump).
fn fork_and_dump(path: &std::path::Path) {
    // SAFETY: the child only allocates (jemalloc and the shim both hold their locks across fork),
    // dumps, and leaves with _exit; the parent waits for it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let blocks: Vec<Vec<u8>> = (0..2_000).map(|i| vec![1u8; 64 + i]).collect();
        black_box(&blocks);
        let ok = jeprof_shim::dump(path).is_ok();
        drop(blocks);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    // Ordering: see `CHILD`.
    CHILD.store(pid, Ordering::SeqCst);
    // Waits for the child's end without reaping it (WNOWAIT), so that its pid stays ours until
    // `CHILD` no longer names it.
    // SAFETY: siginfo_t is plain data, valid all zero.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable for the call; the pid is our own child's.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    assert_eq!(rc, 0, "waitid");
    CHILD.store(0, Ordering::SeqCst);
    let mut status = 0;
    // SAFETY: reaps our own child, which has ended.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    // Checked briefly here (the header period is the writer's choice), parsed after the run: the parser's regex caches are live memory that
    // would move the baseline.
    let text = std::fs::read_to_string(path).expect("the child's dump");
    assert!(
        text.starts_with("heap_v2/"),
        "{}",
        &text[..text.len().min(200)]
    );
    assert!(text.contains("\nMAPPED_LIBRARIES:\n"));
    std::fs::rename(path, path.with_extension("last")).unwrap();
}

fn run_once(dir: &std::path::Path, forks: usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let dumper = {
        let stop = stop.clone();
        let path = dir.join("parent.prof");
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                jeprof_shim::dump_to(&mut std::io::sink()).unwrap();
                if n.is_multiple_of(8) {
                    jeprof_shim::dump(&path).unwrap();
                }
                black_box(jeprof_shim::snapshot());
                n += 1;
            }
        })
    };
    let forker = {
        let path = dir.join("child.prof");
        std::thread::spawn(move || {
            for _ in 0..forks {
                fork_and_dump(&path);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..WORKERS {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        senders.push(tx);
        receivers.push(rx);
    }
    receivers.rotate_right(1);
    let workers: Vec<_> = senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(id, (tx, rx))| std::thread::spawn(move || worker(id, tx, rx)))
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    forker.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    dumper.join().unwrap();
}

fn main() {
    // stdout's buffer is allocated at the first print and lives on: allocate it before the
    // baseline.
    println!("stress_fork: {WORKERS} workers, {FORKS} forks");
    watchdog(Duration::from_secs(150));
    jeprof_shim::configure("sample_rate:16384,symbolize:false").unwrap();
    let dir = std::env::temp_dir().join(format!("jeprof-shim-stress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // Warm-up: everything that allocates once per process (std's thread machinery, the arena, the
    // tables) does so before the baseline is taken.
    run_once(&dir, 1);
    let baseline = jeprof_shim::stats();

    run_once(&dir, FORKS);
    let after = jeprof_shim::stats();
    println!(
        "live samples: baseline {}, after {}; samples taken {}; distinct stacks {}; \
         metadata {} B; dropped {:?}; unwinder {:?}",
        baseline.live_samples,
        after.live_samples,
        after.samples_taken - baseline.samples_taken,
        after.distinct_stacks,
        after.metadata_bytes,
        after.dropped,
        after.unwinder
    );
    assert!(after.samples_taken - baseline.samples_taken > 1_000);
    assert_eq!(after.live_samples, baseline.live_samples);
    assert_eq!(after.dropped.total(), 0);

    // Again with the frame-pointer walker forced on, whatever this build does with frame
    // pointers: it must never fault, and nothing may leak.
    jeprof_shim::configure("unwinder:fp").unwrap();
    run_once(&dir, 2);
    let fp = jeprof_shim::stats();
    println!(
        "frame-pointer run: live samples {}, samples taken {}, unwinder {:?}",
        fp.live_samples,
        fp.samples_taken - after.samples_taken,
        fp.unwinder
    );
    assert_eq!(fp.unwinder, jeprof_shim::Unwinder::FramePointer);
    if fp.live_samples != baseline.live_samples {
        jeprof_shim::configure("symbolize:true,unwinder:backtrace").unwrap();
        let p = jeprof_shim::snapshot();
        for s in p.stacks.iter().filter(|s| s.counts.inuse.objects > 0.0) {
            eprintln!("live: {:?}", s.counts.inuse);
            for (i, f) in s.frames.iter().enumerate().take(10) {
                let k = jeprof_shim::jeprof_dumpfmt::model::symbol_key(i, *f);
                eprintln!("  {k:#x} {:?}", p.symbols.as_ref().unwrap().names.get(&k));
            }
        }
    }
    assert_eq!(fp.live_samples, baseline.live_samples);

    let child = std::fs::read(dir.join("child.last")).unwrap();
    let child = jeprof_shim::jeprof_dumpfmt::read::parse(&child).expect("the child's dump reads");
    assert_eq!(child.sample_period, 16384);
    // The parent still dumps, and the dump reads back.
    let path = dir.join("final.prof");
    jeprof_shim::dump(&path).unwrap();
    jeprof_shim::jeprof_dumpfmt::read::parse(&std::fs::read(&path).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
