//! The size of the page the listener serves at `/`, and the time to serve it, for a heap of
//! 10,000 distinct stacks (bench/RESULTS.md quotes the figures):
//!
//! ```text
//! cargo run --release --example page_size -p jeprof-shim --features http
//! ```
//!
//! Every allocation is sampled (`sample_rate:1`); each of 10,000 paths through a binary tree of
//! two functions, 14 calls deep, holds one 1 KiB block, so each is its own stack. The page is
//! served through [`jeprof_shim::http::handle`], what the listener and the axum example call,
//! five times: the first symbolizes from cold.

use std::hint::black_box;
use std::time::Instant;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const STACKS: u32 = 10_000;
const DEPTH: u32 = 14;

#[inline(never)]
fn left(depth: u32, path: u32, held: &mut Vec<Vec<u8>>) {
    step(depth, path, held);
    black_box(&held);
}

#[inline(never)]
fn right(depth: u32, path: u32, held: &mut Vec<Vec<u8>>) {
    step(depth, path, held);
    black_box(&held);
}

/// Goes one call deeper along `path`'s bits, or allocates at the bottom.
#[inline(never)]
fn step(depth: u32, path: u32, held: &mut Vec<Vec<u8>>) {
    if depth == DEPTH {
        held.push(black_box(vec![path as u8; 1024]));
    } else if path >> depth & 1 == 0 {
        left(depth + 1, path, held);
    } else {
        right(depth + 1, path, held);
    }
}

fn main() {
    jeprof_shim::configure("sample_rate:1,symbolize:true").expect("valid settings");
    let mut held = Vec::with_capacity(STACKS as usize);
    for path in 0..STACKS {
        step(0, path, &mut held);
    }
    let stats = jeprof_shim::stats();
    println!(
        "{} live samples, {} distinct stacks",
        stats.live_samples, stats.distinct_stacks
    );
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let page = jeprof_shim::http::handle(&jeprof_shim::http::Request::get("/"));
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(page.status, 200);
        size = page.body.len();
    }
    let mut warm = times[1..].to_vec();
    warm.sort_by(f64::total_cmp);
    println!(
        "page: {size} bytes; served in {:.0} ms the first time, {:.0} ms after (median of 4; \
         {:.0}–{:.0})",
        times[0],
        warm[warm.len() / 2],
        warm[0],
        warm[warm.len() - 1]
    );
    black_box(held);
}
