//! The cost of a dump's residency figures (`rss`): a heap of 10,000 live samples, dumped to a
//! sink alternately with `rss:true` and `rss:false`, the median CPU time of each printed. The
//! page map is read per 2 MiB of sampled arena in use, so the cost follows the sampled bytes:
//! `small` holds objects of 16 bytes to 2 KiB (the samples fill about 10 MiB of the arena),
//! `large` objects of 64 bytes to 64 KiB (objects well above the period are nearly all sampled,
//! and fill about 300 MiB). `symbolize:false`, so that what is timed is the dump's own work
//! (the in-process symbolizer's first run dwarfs it and is the same either way).
//!
//! `cargo run -p jeprof-shim --example rss_cost -- small|large` (the workspace's dev profile is
//! optimized).

/// This thread's CPU time (user and system), in milliseconds: what the dump costs the process,
/// less sensitive than wall time to other work on a shared machine.
fn thread_cpu_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const LIVE_SAMPLES: u64 = 10_000;
const ROUNDS: usize = 21;

fn main() {
    jeprof_shim::configure("sample_rate:16384,symbolize:false").unwrap();
    jeprof_shim::reseed(1);
    let mut heap: Vec<Vec<u8>> = Vec::new();
    let large = std::env::args().nth(1).as_deref() == Some("large");
    let (smallest, classes) = if large { (64usize, 11) } else { (16, 8) };
    let mut state = 1u64;
    while jeprof_shim::stats().live_samples < LIVE_SAMPLES {
        for _ in 0..1000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let size = smallest << ((state >> 33) % classes);
            heap.push(vec![1u8; size]);
        }
    }
    let stats = jeprof_shim::stats();
    let mut with = Vec::new();
    let mut without = Vec::new();
    for _ in 0..ROUNDS {
        for (on, times) in [(true, &mut with), (false, &mut without)] {
            jeprof_shim::configure(&format!("rss:{on}")).unwrap();
            let start = thread_cpu_ms();
            jeprof_shim::dump_to(&mut std::io::sink()).unwrap();
            times.push(thread_cpu_ms() - start);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (w, wo) = (median(&mut with), median(&mut without));
    println!(
        "{} live samples, {} stacks, {:.0} MiB held: dump {w:.2} ms CPU with rss, {wo:.2} ms \
         without (median of {ROUNDS}), residency {:+.2} ms",
        stats.live_samples,
        stats.distinct_stacks,
        heap.iter().map(Vec::len).sum::<usize>() as f64 / (1 << 20) as f64,
        w - wo
    );
}
