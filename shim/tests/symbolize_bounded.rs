//! In-process symbolization of this test program (tokio, std and the test's own code, full debug
//! info) stays within its memory bound, and names every address as backtrace does: the same
//! inlined frames, innermost first, with the same files and lines.

use std::ffi::c_void;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use jeprof_shim::jeprof_dumpfmt::SourceLine;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// The bound on the growth of the process's anonymous memory that symbolizing a dump may cause.
const BOUND: u64 = 16 << 20;

/// `RssAnon` of this process in bytes, read into a stack buffer (nothing allocated).
fn rss_anon() -> u64 {
    let mut buf = [0u8; 4096];
    let mut n = 0;
    let mut file = std::fs::File::open("/proc/self/status").expect("/proc/self/status");
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    std::str::from_utf8(&buf[..n])
        .expect("status is text")
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("RssAnon")
        * 1024
}

/// Allocations from many places: tokio's scheduler and channels, collections, formatting.
fn workload() -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
        let mut tasks = Vec::new();
        for t in 0..16 {
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                let mut map = std::collections::BTreeMap::new();
                for i in 0..200 {
                    map.insert(i, vec![t as u8; 64 + i]);
                    let line = format!("task {t} item {i} {:?}", map.len());
                    tx.send(line).await.expect("send");
                }
                map.len()
            }));
        }
        drop(tx);
        let mut kept = Vec::new();
        while let Some(line) = rx.recv().await {
            let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
            words.sort();
            kept.push(words.join(","));
        }
        for task in tasks {
            task.await.expect("task");
        }
        kept
    })
}

/// What backtrace names `key` (an address inside a call, as a dump's keys are): names and the
/// position of each.
fn backtrace_names(key: u64) -> (Vec<String>, Vec<Option<SourceLine>>) {
    let mut names = Vec::new();
    let mut positions = Vec::new();
    // backtrace::resolve subtracts one from the address it is given (it expects return
    // addresses); dump keys already point into the call.
    backtrace::resolve(key.wrapping_add(1) as usize as *mut c_void, |symbol| {
        if let Some(name) = symbol.name() {
            names.push(format!("{name:#}"));
            positions.push(match (symbol.filename(), symbol.lineno()) {
                (Some(file), Some(line)) => Some(SourceLine {
                    file: file.display().to_string(),
                    line,
                }),
                _ => None,
            });
        }
    });
    (names, positions)
}

#[test]
fn symbolizing_a_dump_stays_under_the_bound_and_names_as_backtrace_does() {
    jeprof_shim::configure("sample_rate:256,symbolize:true").expect("settings");
    let kept = workload();
    assert!(kept.len() > 1000);

    // The highest RssAnon while the dump is symbolized, read every millisecond by a thread
    // that allocates nothing.
    let before = rss_anon();
    let peak = AtomicU64::new(before);
    let done = AtomicBool::new(false);
    let profile = std::thread::scope(|s| {
        s.spawn(|| {
            // Ordering: `done` is stored after the snapshot returns; one more reading follows.
            while !done.load(Ordering::Acquire) {
                peak.fetch_max(rss_anon(), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            peak.fetch_max(rss_anon(), Ordering::Relaxed);
        });
        let profile = jeprof_shim::snapshot();
        done.store(true, Ordering::Release);
        profile
    });
    let growth = peak.load(Ordering::Relaxed).saturating_sub(before);
    let cost = jeprof_shim::stats()
        .last_symbolization
        .expect("the snapshot symbolized");
    assert!(growth < BOUND, "RssAnon grew by {growth} bytes");
    assert!(cost.peak_bytes < BOUND, "{cost:?}");

    let symbols = profile.symbols.as_ref().expect("symbols");
    let keys = profile.symbol_keys();
    assert!(keys.len() >= 50, "only {} addresses", keys.len());
    assert!(cost.addresses >= 50, "{cost:?}");
    eprintln!(
        "{} addresses, RssAnon growth {growth}, {cost:?}",
        keys.len()
    );
    let mut mismatches = Vec::new();
    for &key in &keys {
        let ours = (
            symbols.names.get(&key).cloned().unwrap_or_default(),
            symbols.lines.get(&key).cloned().unwrap_or_default(),
        );
        let mut theirs = backtrace_names(key);
        if theirs.1.iter().all(Option::is_none) {
            // The dump writes no positions for an address that has none.
            theirs.1.clear();
        }
        // A C function named by a symbol table may have aliases at its address (`clone3` and
        // `__clone3`): backtrace picks one by an unstable sort, the symbolizer the table's last;
        // both are right.
        let aliases = ours.1 == theirs.1
            && ours.0.len() == 1
            && theirs.0.len() == 1
            && !ours.0[0].contains("::");
        if ours != theirs && !aliases {
            mismatches.push((key, ours, theirs));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} addresses named differently from backtrace, e.g. {:#?}",
        mismatches.len(),
        keys.len(),
        &mismatches[..mismatches.len().min(3)]
    );
    // The comparison covered inlined frames and source lines, not only function names.
    assert!(
        symbols.names.values().any(|n| n.len() > 1),
        "no inlined frame"
    );
    assert!(
        symbols.lines.values().flatten().any(Option::is_some),
        "no source line"
    );
}
