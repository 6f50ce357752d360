//! The churn workload shared by the bench binaries.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Live objects per thread.
pub const LIVE_PER_THREAD: usize = 1024;

/// Each of `threads` threads replaces a random one of its 1,024 live blocks with a new block of
/// 16–4096 bytes, `warmup` times and then `allocations_per_thread` times. Returns the wall time of
/// the second part and the CPU time its threads spent in it (each thread's own clock, summed).
///
/// The threads meet at a barrier between the two parts, so a warm-up leaves every one-time cost
/// (the threads' first allocations, and a profiler's arena, tables and caches, once each thread
/// has taken a sample) out of what is timed: what remains is the cost per allocation of a
/// long-running process. `at_timed_start` runs while they wait there, after every warm-up and
/// before any timed allocation (to start the bench's own counters afresh).
pub fn churn(
    threads: usize,
    warmup: usize,
    allocations_per_thread: usize,
    at_timed_start: fn(),
) -> (Duration, Duration) {
    // Two barriers: every warm-up is done at the first, `at_timed_start` runs between them.
    let warmed_up = Arc::new(Barrier::new(threads + 1));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let warmed_up = Arc::clone(&warmed_up);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let mut slots: Vec<Vec<u8>> = (0..LIVE_PER_THREAD).map(|_| Vec::new()).collect();
                let mut replace = |slots: &mut Vec<Vec<u8>>| {
                    let r = next();
                    let slot = (r as usize) % LIVE_PER_THREAD;
                    let size = 16 + ((r >> 32) as usize) % 4081;
                    let mut v = Vec::with_capacity(size);
                    // Touch the block so the allocation cannot be elided.
                    v.push(r as u8);
                    slots[slot] = black_box(v);
                };
                for _ in 0..warmup {
                    replace(&mut slots);
                }
                warmed_up.wait();
                barrier.wait();
                let cpu_before = thread_cpu_time();
                for _ in 0..allocations_per_thread {
                    replace(&mut slots);
                }
                let cpu = thread_cpu_time() - cpu_before;
                black_box(&slots);
                cpu
            })
        })
        .collect();
    warmed_up.wait();
    at_timed_start();
    barrier.wait();
    let start = Instant::now();
    let cpu = handles.into_iter().map(|h| h.join().unwrap()).sum();
    (start.elapsed(), cpu)
}

/// The calling thread's CPU time so far.
fn thread_cpu_time() -> Duration {
    // SAFETY: clock_gettime writes one timespec, which we provide zeroed.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The environment variable `name` as a count, `default` when unset. Anything else than a whole
/// number ends the process with a message and exit code 2.
pub fn env_count(name: &str, default: usize) -> usize {
    let Ok(value) = std::env::var(name) else {
        return default;
    };
    value.trim().parse().unwrap_or_else(|_| {
        eprintln!("{name}: {value:?} is not a whole number");
        std::process::exit(2)
    })
}

/// `CHURN_WARMUP`: allocations per thread before the timed part (0 when unset).
pub fn warmup() -> usize {
    env_count("CHURN_WARMUP", 0)
}

/// Runs the churn as the bench's children do and prints what they report: wall time, and CPU
/// time: the whole process's (user + system) without a warm-up, as before; with one, the threads'
/// own CPU time in the timed part, which leaves out the warm-up and all one-time costs.
/// `at_timed_start` as for [`churn`].
pub fn run_and_report(threads: usize, allocations_per_thread: usize, at_timed_start: fn()) {
    let warmup = warmup();
    let cpu_before = cpu_time();
    let (elapsed, thread_cpu) = churn(threads, warmup, allocations_per_thread, at_timed_start);
    let cpu = if warmup == 0 {
        cpu_time() - cpu_before
    } else {
        thread_cpu
    };
    println!("elapsed_ns {}", elapsed.as_nanos());
    println!("cpu_ns {}", cpu.as_nanos());
}

/// User + system CPU time of this process so far. Less disturbed than wall time when other
/// processes compete for the cores.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage struct, which we provide zeroed.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
