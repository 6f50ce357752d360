//! The HTTP endpoints under load, measured in one run (never assertions). See `bench/README.md`.
//!
//! ```text
//! cargo bench -p jeprof-bench --bench serve
//! ```
//!
//! 1. Builds a heap of `--live` (default 100,000) live samples over about 500 stacks (4 KiB
//!    blocks at R = 1 KiB, so nearly every block is a sample), then sets R back to 512 KiB.
//! 2. Latency: `--requests` (default 10) sequential requests to each endpoint of a listener on
//!    loopback (`jeprof_shim::serve`), each read to the end; median and maximum.
//! 3. Stall: `--threads` (default 2) threads allocate and free 64–4096 B blocks in a loop, timing
//!    every allocation–free pair; the longest pair and the pairs over 100 µs and over 1 ms, first
//!    for `--seconds` (default 3) with no requests, then for as long while a client requests
//!    `/debug/pprof/heap` back to back.
//!
//! Without `--bench` (under `cargo test`) it runs a tiny version that fails when an endpoint does.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// The endpoints' latency and the allocating threads' stall while a profile is served.
#[derive(Parser)]
#[command(
    name = "serve",
    bin_name = "cargo bench -p jeprof-bench --bench serve --",
    after_help = "Exit status: 0; 1 when an endpoint failed; 2 on bad flags."
)]
struct Cli {
    /// Live samples in the heap served.
    #[arg(long, default_value_t = 100_000)]
    live: usize,
    /// Requests per endpoint.
    #[arg(long, default_value_t = 10)]
    requests: usize,
    /// Allocating threads in the stall measurement.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds of each stall measurement.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Passed by `cargo bench`; without it, a quick self-check.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Keeps a 4 KiB block live from a stack `depth` frames deeper than the caller's (at most 100,
/// well inside the 128 frames kept), through one of five leaves: 500 distinct stacks.
#[inline(never)]
fn keep_at_depth(depth: usize, leaf: usize, kept: &mut Vec<Vec<u8>>) {
    if depth == 0 {
        match leaf {
            0 => leaf_0(kept),
            1 => leaf_1(kept),
            2 => leaf_2(kept),
            3 => leaf_3(kept),
            _ => leaf_4(kept),
        }
    } else {
        keep_at_depth(depth - 1, leaf, kept);
        black_box(depth);
    }
}

macro_rules! leaves {
    ($($name:ident = $fill:literal),*) => {$(
        #[inline(never)]
        fn $name(kept: &mut Vec<Vec<u8>>) {
            kept.push(vec![$fill; 4096]);
        }
    )*};
}
leaves!(
    leaf_0 = 1u8,
    leaf_1 = 2u8,
    leaf_2 = 3u8,
    leaf_3 = 4u8,
    leaf_4 = 5u8
);

/// One request, read to the end: (status, body bytes).
fn request(addr: SocketAddr, raw: &[u8]) -> std::io::Result<(u16, usize)> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(raw)?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)?;
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no response head"))?;
    let status = std::str::from_utf8(&all[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    Ok((status, all.len() - end - 4))
}

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\n\r\n").into_bytes()
}

/// What the allocating threads saw.
#[derive(Debug, Default, Clone, Copy)]
struct Stall {
    pairs: u64,
    longest: Duration,
    over_100us: u64,
    over_1ms: u64,
}

fn measure_stall(threads: usize, seconds: u64, during: impl FnOnce(&AtomicBool) + Send) -> Stall {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut s = Stall::default();
                let mut i = t as u64;
                // Ordering: a stop flag, nothing published through it.
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    let v: Vec<u8> = Vec::with_capacity(64 + ((i * 2_654_435_761) % 4033) as usize);
                    black_box(&v);
                    drop(v);
                    let took = start.elapsed();
                    s.pairs += 1;
                    s.longest = s.longest.max(took);
                    s.over_100us += u64::from(took > Duration::from_micros(100));
                    s.over_1ms += u64::from(took > Duration::from_millis(1));
                    i += 1;
                }
                s
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let flag = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| during(&flag));
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Ordering: as above.
        flag.store(true, Ordering::Relaxed);
    });
    // Ordering: as above.
    stop.store(true, Ordering::Relaxed);
    let mut total = Stall::default();
    for w in workers {
        let s = w.join().unwrap();
        total.pairs += s.pairs;
        total.longest = total.longest.max(s.longest);
        total.over_100us += s.over_100us;
        total.over_1ms += s.over_1ms;
    }
    total
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (live, requests, seconds) = if cli.bench {
        (cli.live, cli.requests, cli.seconds)
    } else {
        (2_000, 1, 1)
    };
    jeprof_shim::set_sample_rate(1024);
    let mut kept = Vec::with_capacity(live + live / 20);
    while (jeprof_shim::stats().live_samples as usize) < live {
        for d in 0..500 {
            keep_at_depth(d % 100, d / 100, &mut kept);
        }
    }
    jeprof_shim::set_sample_rate(jeprof_shim::DEFAULT_SAMPLE_RATE);
    let stats = jeprof_shim::stats();
    println!(
        "heap: {} live samples, {} stacks, {} blocks of 4 KiB",
        stats.live_samples,
        stats.distinct_stacks,
        kept.len()
    );
    let server = jeprof_shim::serve("127.0.0.1:0").expect("listen on loopback");
    let addr = server.local_addr();

    // The addresses jeprof would post: every frame of the heap.
    let pcs: Vec<String> = jeprof_shim::snapshot()
        .symbol_keys()
        .iter()
        .map(|k| format!("0x{k:x}"))
        .collect();
    let symbol_body = pcs.join("+");
    let mut post = format!(
        "POST /pprof/symbol HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        symbol_body.len()
    )
    .into_bytes();
    post.extend_from_slice(symbol_body.as_bytes());

    let endpoints: Vec<(String, Vec<u8>)> = vec![
        (
            "/debug/pprof/heap (pprof, symbolized)".into(),
            get("/debug/pprof/heap"),
        ),
        (
            "/debug/pprof/heap?debug=1 (heap_v2 text)".into(),
            get("/debug/pprof/heap?debug=1"),
        ),
        (
            "/pprof/heap (heap_v2, no symbols)".into(),
            get("/pprof/heap"),
        ),
        (
            format!("POST /pprof/symbol ({} addresses)", pcs.len()),
            post,
        ),
        ("/pprof/cmdline".into(), get("/pprof/cmdline")),
    ];
    println!("| endpoint | median | max | body |");
    println!("|---|---|---|---|");
    let mut failed = false;
    for (name, raw) in &endpoints {
        let mut times = Vec::new();
        let mut body = 0;
        for _ in 0..requests {
            let start = Instant::now();
            match request(addr, raw) {
                Ok((200, len)) => body = len,
                other => {
                    eprintln!("{name}: {other:?}");
                    failed = true;
                }
            }
            times.push(start.elapsed());
        }
        times.sort();
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {body} B |",
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3
        );
    }

    let idle = measure_stall(cli.threads, seconds, |_| {});
    let served = std::sync::atomic::AtomicU64::new(0);
    let busy = measure_stall(cli.threads, seconds, |stop| {
        // Ordering: as in measure_stall.
        while !stop.load(Ordering::Relaxed) {
            match request(addr, &get("/debug/pprof/heap")) {
                // Ordering: a counter read after the scope ends.
                Ok((200, _)) => drop(served.fetch_add(1, Ordering::Relaxed)),
                _ => return,
            }
        }
    });
    println!("| allocating threads | pairs | longest | > 100 µs | > 1 ms |");
    println!("|---|---|---|---|---|");
    for (name, s) in [
        ("idle", idle),
        ("serving /debug/pprof/heap back to back", busy),
    ] {
        println!(
            "| {name} | {} | {:.2} ms | {} | {} |",
            s.pairs,
            s.longest.as_secs_f64() * 1e3,
            s.over_100us,
            s.over_1ms
        );
    }
    // Ordering: after the scope.
    let n = served.load(Ordering::Relaxed);
    println!("profiles served during the second measurement: {n}");
    black_box(kept);
    if failed || n == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
