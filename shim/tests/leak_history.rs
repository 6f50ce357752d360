//! The in-process leak history: `leak_suspects()` names the function that leaks steadily and
//! neither a store that grew and stayed nor a cache that fills and empties; while the history is
//! too short it says so; `/debug/pprof/leaks` (with the `http` feature) answers the same suspects;
//! and the history's memory stays within its documented bound with more live stacks than a
//! snapshot keeps and more snapshots than the ring holds, the oldest dropped.
//!
//! One process, phases in order (the history is process-wide). Waits are on the history's own
//! count of snapshots, with generous deadlines that only bound a hang.

#[cfg(feature = "http")]
#[path = "common/http.rs"]
mod client;

use std::hint::black_box;
use std::time::{Duration, Instant};

use jeprof_shim::{LeakHistoryError, LEAK_HISTORY_STACKS};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Rounds of the workload, two snapshots each (the ring, `leak_history:64`, holds them all).
const ROUNDS: usize = 30;

/// Waits until the history recorded `more` snapshots after now.
fn wait_for_snapshots(more: u64) {
    let target = jeprof_shim::stats().leak_snapshots + more;
    let deadline = Instant::now() + Duration::from_secs(120);
    while jeprof_shim::stats().leak_snapshots < target {
        assert!(
            Instant::now() < deadline,
            "the history recorded no snapshot in 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Leaks 128 KiB a call, in 4 KiB blocks.
#[inline(never)]
fn leaky_site(kept: &mut Vec<Vec<u8>>) {
    for _ in 0..32 {
        kept.push(black_box(vec![1u8; 4096]));
    }
}

/// Grows for the first rounds (a store filled at warm-up), then stays.
#[inline(never)]
fn flat_site(store: &mut Vec<Vec<u8>>, round: usize) {
    if round < 6 {
        for _ in 0..32 {
            store.push(black_box(vec![2u8; 4096]));
        }
    }
}

/// A cache that fills by 256 KiB a round and empties every sixth.
#[inline(never)]
fn cache_site(cache: &mut Vec<Vec<u8>>, round: usize) {
    if round % 6 == 5 {
        cache.clear();
        cache.shrink_to_fit();
    } else {
        for _ in 0..64 {
            cache.push(black_box(vec![3u8; 4096]));
        }
    }
}

/// One of `2^depth` distinct stacks, chosen by `path`'s bits, each keeping `bytes` live.
#[inline(never)]
fn fan(path: u32, depth: u32, bytes: usize, out: &mut Vec<Vec<u8>>) {
    if depth == 0 {
        out.push(black_box(vec![4u8; bytes]));
    } else if path & 1 == 0 {
        fan_left(path >> 1, depth - 1, bytes, out);
    } else {
        fan_right(path >> 1, depth - 1, bytes, out);
    }
    black_box(());
}

#[inline(never)]
fn fan_left(path: u32, depth: u32, bytes: usize, out: &mut Vec<Vec<u8>>) {
    fan(path, depth, bytes, out);
    black_box(0);
}

#[inline(never)]
fn fan_right(path: u32, depth: u32, bytes: usize, out: &mut Vec<Vec<u8>>) {
    fan(path, depth, bytes, out);
    black_box(1);
}

fn a_short_history_is_an_error_saying_how_many_snapshots_are_needed() {
    match jeprof_shim::leak_suspects() {
        Err(LeakHistoryError::TooShort {
            snapshots, needed, ..
        }) => {
            assert!(snapshots < needed, "{snapshots} of {needed}");
            assert_eq!(needed, 5, "evenly spaced, the default window needs 5");
        }
        other => panic!("expected TooShort, got {other:?}"),
    }
    #[cfg(feature = "http")]
    {
        let answer =
            jeprof_shim::http::handle(&jeprof_shim::http::Request::get("/debug/pprof/leaks"));
        assert_eq!(answer.status, 503);
        let reason = String::from_utf8_lossy(&answer.body);
        assert!(reason.contains("the test needs 5"), "{reason}");
    }
}

fn leak_suspects_name_the_leaking_function_and_not_the_decoys() -> Vec<jeprof_shim::LeakSuspect> {
    let (mut leaked, mut store, mut cache) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        leaky_site(&mut leaked);
        flat_site(&mut store, round);
        cache_site(&mut cache, round);
        // Two snapshots: the second began after this round's work.
        wait_for_snapshots(2);
    }
    // Stop recording: what is asked next reads the same history.
    jeprof_shim::configure("leak_interval:0").unwrap();
    let suspects = jeprof_shim::leak_suspects().expect("enough snapshots");
    let functions: Vec<&str> = suspects.iter().map(|s| s.function.as_str()).collect();
    assert!(
        functions.iter().any(|f| f.ends_with("leaky_site")),
        "{functions:?}"
    );
    for decoy in ["flat_site", "cache_site"] {
        assert!(
            !functions.iter().any(|f| f.ends_with(decoy)),
            "{decoy} flagged: {functions:?}"
        );
    }
    let leak = suspects
        .iter()
        .find(|s| s.function.ends_with("leaky_site"))
        .unwrap();
    assert!(leak.rate > 0.0 && leak.rate_95.0 <= leak.rate && leak.rate <= leak.rate_95.1);
    assert!(leak.live_bytes > 0.0 && leak.p_value < 0.05, "{leak:?}");
    assert!(
        leak.stack.iter().any(|f| f.ends_with("leaky_site")),
        "{:?}",
        leak.stack
    );
    black_box((leaked, store, cache));
    suspects
}

#[cfg(feature = "http")]
fn the_endpoint_answers_the_suspects_leak_suspects_gives(suspects: &[jeprof_shim::LeakSuspect]) {
    let server = jeprof_shim::serve("127.0.0.1:0").expect("listener");
    let addr = server.local_addr();
    let json = client::get(addr, "/debug/pprof/leaks?format=json").expect("served");
    assert_eq!(json.status, 200, "{}", json.text());
    let body = json.text();
    // One `"function":` key per suspect, in leak_suspects()'s order.
    let named: Vec<&str> = body
        .split("\"function\":\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    let expected: Vec<&str> = suspects.iter().map(|s| s.function.as_str()).collect();
    assert_eq!(named, expected, "{body}");
    for key in [
        "\"growth_bytes_per_hour\":",
        "\"growth_bytes_per_hour_95\":[",
        "\"live_bytes_95\":[",
        "\"started\":\"",
        "\"p_value\":",
    ] {
        assert_eq!(body.matches(key).count(), suspects.len(), "{key} in {body}");
    }
    let text = client::get(addr, "/debug/pprof/leaks").expect("served");
    assert_eq!(text.status, 200);
    let table = text.text();
    println!("{table}");
    assert!(
        table.starts_with(&format!("Leak suspects: {} of ", suspects.len())),
        "{table}"
    );
    for s in suspects {
        assert!(table.contains(&s.function), "{} not in {table}", s.function);
    }
    server.shutdown();
}

fn the_history_stays_within_its_bound_and_drops_its_oldest_snapshots() {
    const SMALL_RING: usize = 8;
    // 4,096 stacks of 4 KiB at R = 512 B: each has a live sample but for about e^-8 of them.
    jeprof_shim::configure(&format!("sample_rate:512,leak_history:{SMALL_RING}")).unwrap();
    let mut kept = Vec::with_capacity(1 << 12);
    for path in 0..1u32 << 12 {
        fan(path, 12, 4096, &mut kept);
    }
    let live_stacks = jeprof_shim::snapshot()
        .stacks
        .iter()
        .filter(|s| s.counts.inuse.bytes > 0.0)
        .count();
    assert!(
        live_stacks > LEAK_HISTORY_STACKS,
        "{live_stacks} live stacks"
    );
    let recorded = jeprof_shim::stats().leak_snapshots;
    jeprof_shim::configure("leak_interval:0.05").unwrap();
    wait_for_snapshots(2 * SMALL_RING as u64);
    let stats = jeprof_shim::stats();
    assert!(stats.leak_snapshots >= recorded + 2 * SMALL_RING as u64);
    let entry = 20;
    let bound = SMALL_RING * (LEAK_HISTORY_STACKS * entry + 48);
    let full = SMALL_RING * LEAK_HISTORY_STACKS * entry;
    let held = stats.leak_history_bytes as usize;
    println!(
        "history: {held} bytes for {SMALL_RING} snapshots of {live_stacks} live stacks \
         (bound {bound})"
    );
    assert!(held <= bound, "{held} bytes over the bound {bound}");
    // Every snapshot kept is full (the cap reached), so none predates the fan: the older ones,
    // with far fewer stacks, were dropped.
    assert!(
        held >= full,
        "{held} bytes: fewer than {SMALL_RING} full snapshots"
    );
    black_box(kept);
}

fn main() {
    jeprof_shim::configure("sample_rate:16384,leak_interval:0.05,leak_history:64").unwrap();
    a_short_history_is_an_error_saying_how_many_snapshots_are_needed();
    println!("ok: a short history is an error saying how many snapshots are needed");
    let suspects = leak_suspects_name_the_leaking_function_and_not_the_decoys();
    println!("ok: leak_suspects names the leaking function and not the decoys");
    #[cfg(feature = "http")]
    {
        the_endpoint_answers_the_suspects_leak_suspects_gives(&suspects);
        println!("ok: the endpoint answers the suspects leak_suspects gives");
    }
    black_box(suspects);
    the_history_stays_within_its_bound_and_drops_its_oldest_snapshots();
    println!("ok: the history stays within its bound and drops its oldest snapshots");
}
