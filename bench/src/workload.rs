//! The churn itself: what every child process runs, under whichever global allocator it was built
//! with, and the figures it prints for the runner.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Live objects per thread.
pub const LIVE_PER_THREAD: usize = 1024;

/// Smallest block the churn allocates, in bytes.
pub const MIN_SIZE: usize = 16;

/// Largest block the churn allocates, in bytes.
pub const MAX_SIZE: usize = 4096;

/// The churn's shape: what the children take on their command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct Churn {
    /// Threads, each with its own live blocks.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: u64,
    /// Allocations per thread in the timed part.
    #[arg(long)]
    pub allocations: u64,
    /// Allocations per thread before the timed part (0: time the whole process instead).
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
}

/// What one churn took.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Wall time of the timed part.
    pub wall: Duration,
    /// CPU time: without a warm-up, the whole process's (user + system) from before the threads
    /// start to after they end; with one, the sum of the threads' own CPU time in the timed part,
    /// which leaves out the warm-up and every one-time cost.
    pub cpu: Duration,
}

/// Runs `churn`: each thread replaces a random one of its 1,024 live blocks with a new block of
/// 16–4096 bytes, `warmup` times and then `allocations` times.
///
/// The threads meet at a barrier between the two parts, so a warm-up leaves every one-time cost
/// (the threads' first allocations, and a profiler's arena, tables and caches, once each thread
/// has taken a sample) out of what is timed: what remains is the cost per allocation of a
/// long-running process.
pub fn run(churn: &Churn) -> Timing {
    run_in_scopes(churn, 0)
}

/// [`run`] with thread `t` inside the jeprof-shim scope `churn-<t mod scopes>` (0: no scope), so
/// that a profiler's scopes pay whatever they cost per allocation.
pub fn run_in_scopes(churn: &Churn, scopes: u64) -> Timing {
    let process_before = process_cpu_time();
    let threads = churn.threads as usize;
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let barrier = Arc::clone(&barrier);
            let Churn {
                warmup,
                allocations,
                ..
            } = *churn;
            std::thread::spawn(move || {
                let _scope = (scopes > 0).then(|| {
                    jeprof_shim::Scope::new(&format!("churn-{}", t as u64 % scopes)).enter()
                });
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
                    let size = MIN_SIZE + ((r >> 32) as usize) % (MAX_SIZE - MIN_SIZE + 1);
                    let mut v = Vec::with_capacity(size);
                    // Touch the block so the allocation cannot be elided.
                    v.push(r as u8);
                    slots[slot] = black_box(v);
                };
                for _ in 0..warmup {
                    replace(&mut slots);
                }
                barrier.wait();
                let cpu_before = thread_cpu_time();
                for _ in 0..allocations {
                    replace(&mut slots);
                }
                let cpu = thread_cpu_time() - cpu_before;
                black_box(&slots);
                cpu
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let threads_cpu: Duration = handles
        .into_iter()
        .map(|h| h.join().expect("a churn thread panicked"))
        .sum();
    let wall = start.elapsed();
    let cpu = if churn.warmup == 0 {
        process_cpu_time() - process_before
    } else {
        threads_cpu
    };
    Timing { wall, cpu }
}

/// Prints `timing` as the runner reads it: `key value` lines.
pub fn print_timing(timing: &Timing) {
    println!("elapsed_ns {}", timing.wall.as_nanos());
    println!("cpu_ns {}", timing.cpu.as_nanos());
}

/// `clock` read through `clock_gettime` (nix's safe wrapper over libc's; see `Cargo.toml` for why
/// not rustix).
fn cpu_clock(clock: nix::time::ClockId) -> Duration {
    match nix::time::clock_gettime(clock) {
        // A CPU clock is never negative; a value that were would read as zero.
        Ok(ts) => Duration::new(
            u64::try_from(ts.tv_sec()).unwrap_or(0),
            u32::try_from(ts.tv_nsec()).unwrap_or(0),
        ),
        // Unreachable for the CPU clocks on Linux; zero makes the figure obviously wrong rather
        // than a panic inside a timed child.
        Err(_) => Duration::ZERO,
    }
}

/// The calling thread's CPU time so far.
pub fn thread_cpu_time() -> Duration {
    cpu_clock(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// This process's CPU time so far (user + system, all threads). Less disturbed than wall time
/// when other processes compete for the cores.
pub fn process_cpu_time() -> Duration {
    cpu_clock(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmed_up_churn_times_only_the_threads_own_cpu() {
        // The timed part is empty: with a warm-up, only the threads' clocks over nothing count,
        // so the CPU time stays far below what the warm-up itself took.
        let warm = run(&Churn {
            threads: 2,
            allocations: 0,
            warmup: 20_000,
        });
        let cold = run(&Churn {
            threads: 2,
            allocations: 20_000,
            warmup: 0,
        });
        assert!(
            warm.cpu * 10 < cold.cpu,
            "warm-up leaked into the timed CPU: {:?} vs a whole run's {:?}",
            warm.cpu,
            cold.cpu
        );
    }

    #[test]
    fn process_cpu_clock_advances_with_work() {
        let before = process_cpu_time();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        black_box(x);
        assert!(process_cpu_time() > before);
    }
}
