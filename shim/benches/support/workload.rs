//! The churn workload shared by the bench binaries.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Live objects per thread.
pub const LIVE_PER_THREAD: usize = 1024;

/// Each of `threads` threads replaces a random one of its 1,024 live blocks with a new block of
/// 16–4096 bytes, `allocations_per_thread` times. Returns the wall time.
pub fn churn(threads: usize, allocations_per_thread: usize) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let mut slots: Vec<Vec<u8>> = (0..LIVE_PER_THREAD).map(|_| Vec::new()).collect();
                for _ in 0..allocations_per_thread {
                    let r = next();
                    let slot = (r as usize) % LIVE_PER_THREAD;
                    let size = 16 + ((r >> 32) as usize) % 4081;
                    let mut v = Vec::with_capacity(size);
                    // Touch the block so the allocation cannot be elided.
                    v.push(r as u8);
                    slots[slot] = black_box(v);
                }
                black_box(&slots);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
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
