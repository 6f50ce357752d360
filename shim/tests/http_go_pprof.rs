//! `go tool pprof` (a real client) reads `/debug/pprof/heap` from the listener and prints the
//! totals `snapshot()` gives, within rounding; `/debug/pprof/allocs?seconds=N` reports, as
//! `alloc_space`, only what was allocated in those seconds, with the current `inuse_space`.
//! Needs `go` ([`jeprof_conformance::require_go`]: skipped with a notice where it is missing, a
//! failure under `CI=true`).

#[path = "common/http.rs"]
mod client;
mod common;
#[path = "common/go_pprof.rs"]
mod go_pprof;

use std::hint::black_box;
use std::time::Duration;

use go_pprof::{cum_of, go_top, total};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Whether a TCP connection to local `port` is established (`/proc/net/tcp`, state `01`).
fn established_to(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!(":{port:04X}");
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 3 && fields[1].ends_with(&local) && fields[3] == "01"
    })
}

#[inline(never)]
fn site_before() -> Vec<u8> {
    vec![5u8; 4096]
}

#[inline(never)]
fn site_during() -> Vec<u8> {
    vec![6u8; 4096]
}

fn main() {
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    client::watchdog(Duration::from_secs(400), "http_go_pprof");
    let scratch = tempfile::tempdir().unwrap();
    jeprof_shim::reseed(11);
    let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
    let base = format!("http://{}", server.local_addr());

    // 1. A frozen heap: go's totals are snapshot()'s, each stack rounded to whole bytes.
    let live = common::run(100);
    jeprof_shim::set_active(false);
    let snapshot = jeprof_shim::snapshot();
    let rounding = snapshot.stacks.len() as f64;
    for (index, want) in [
        ("inuse_space", snapshot.totals().inuse.bytes),
        ("alloc_space", snapshot.totals().accum.bytes),
    ] {
        let top = go_top(
            &go,
            &format!("{base}/debug/pprof/heap"),
            index,
            scratch.path(),
        );
        let got = total(&top);
        println!("{index}: go tool pprof {got}, snapshot {want:.1}");
        assert!(
            (got - want).abs() <= rounding,
            "{index}: go tool pprof printed {got}, snapshot() says {want}\n{top}"
        );
    }
    // The program's own mapping is the first, so pprof names the program (this test binary).
    let top = go_top(
        &go,
        &format!("{base}/debug/pprof/heap"),
        "inuse_space",
        scratch.path(),
    );
    let exe = std::env::current_exe().unwrap();
    let file = format!("File: {}", exe.file_name().unwrap().to_string_lossy());
    assert!(top.lines().any(|l| l == file), "not {file:?}:\n{top}");
    for (site, _) in common::SITES {
        let top = go_top(
            &go,
            &format!("{base}/debug/pprof/heap"),
            "inuse_space",
            scratch.path(),
        );
        assert!(cum_of(&top, site).is_some(), "{site} not named:\n{top}");
    }
    drop(live);

    // 2. A window: 32 MiB allocated before it, 48 MiB during it (both kept live).
    jeprof_shim::set_sample_rate(64 << 10);
    jeprof_shim::set_active(true);
    let before: Vec<Vec<u8>> = (0..8192).map(|_| site_before()).collect();
    let url = format!("{base}/debug/pprof/allocs?seconds=5");
    let fetch = {
        let scratch = scratch.path().to_path_buf();
        let go = go.clone();
        std::thread::spawn(move || {
            let alloc = go_top(&go, &url, "alloc_space", &scratch);
            (alloc, scratch)
        })
    };
    // Once go's connection is established, the handler opens the window as soon as it has read
    // the request line (well within the 0.5 s waited after); the window lasts 5 s.
    let port = server.local_addr().port();
    let connected = std::time::Instant::now();
    // Reading /proc/net/tcp allocates (megabytes on a machine with many sockets), and the window
    // may open between two reads: sampling is paused while polling, so only `site_during` counts.
    jeprof_shim::set_active(false);
    while !established_to(port) {
        assert!(
            connected.elapsed() < Duration::from_secs(120),
            "go tool pprof never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    jeprof_shim::set_active(true);
    let during: Vec<Vec<u8>> = (0..12288).map(|_| site_during()).collect();
    let (alloc, _) = fetch.join().unwrap();
    let truth = during.len() as f64 * 4096.0;
    let got = cum_of(&alloc, "site_during").unwrap_or(0.0);
    println!(
        "window: site_during alloc_space {got} (truth {truth}), total {}",
        total(&alloc)
    );
    assert!(
        (got - truth).abs() <= 0.2 * truth,
        "site_during allocated {truth} in the window; go tool pprof says {got}\n{alloc}"
    );
    assert_eq!(
        cum_of(&alloc, "site_before"),
        None,
        "site_before allocated before the window, yet it shows in its alloc_space:\n{alloc}"
    );
    assert!(total(&alloc) <= 1.2 * truth, "{alloc}");
    // The same delta's in-use figures are the current ones: both sites are live.
    let inuse = go_top(
        &go,
        &format!("{base}/debug/pprof/allocs?seconds=1"),
        "inuse_space",
        scratch.path(),
    );
    let live_before = cum_of(&inuse, "site_before").unwrap_or(0.0);
    assert!(
        (live_before - 32.0 * 1048576.0).abs() <= 0.2 * 32.0 * 1048576.0,
        "site_before keeps 32 MiB live; the delta's inuse_space says {live_before}\n{inuse}"
    );
    black_box((before, during));
    println!("ok");
}
