//! `dump_near_limit` before the OOM killer: this program re-runs itself as a child inside a cgroup
//! v1 memory group of its own with a 400 MiB limit, where the child grows at about 400 MB/s from
//! `grow_site` until the kernel kills it. The child's near-limit dump must be on disk, read with
//! jeprof-compat's report (symbolized later, from the program: the dump is written without
//! symbols) and name `grow_site` as its top user function, with the limit, the use, the cgroup
//! and the signal in its annotations.
//!
//! Runs `NEAR_LIMIT_RUNS` children (default 2, for CI's time budget; the manual's figure is 10
//! runs of 10). Needs root and the v1 memory controller: under `CI=true` a machine without them
//! fails the test (`jeprof_conformance::memory_cgroup`).

use std::hint::black_box;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use jeprof_compat::attribution::Attribution;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::{ReadPolicy, SymbolizeOptions};
use jeprof_conformance::memory_cgroup;
use jeprof_shim::jeprof_dumpfmt::read;
use jeprof_shim::NearLimitWatch;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Set in the child: the directory its dumps go to.
const CHILD: &str = "JEPROF_SHIM_TEST_NEAR_LIMIT_CHILD";
const LIMIT: u64 = 400 << 20;
/// Bytes per second the child grows by.
const RATE: f64 = 400e6;
const BLOCK: usize = 1 << 20;

/// Where the growth comes from: one touched 1 MiB block a call (written to after the allocation,
/// so the allocation is not a tail call that would leave this function out of the stack).
#[inline(never)]
fn grow_site() -> Vec<u8> {
    let mut block = vec![7u8; BLOCK];
    block[0] = black_box(1);
    block
}

/// A steady 16 MiB the child holds from its start: a second site, smaller.
#[inline(never)]
fn steady_site() -> Vec<Vec<u8>> {
    (0..16).map(|_| vec![1u8; BLOCK]).collect()
}

/// The child: grows at [`RATE`] until the OOM killer ends it (or 30 s, which fails the test).
/// `NEAR_LIMIT_IDLE_SECONDS` (by hand) makes it idle that long before it grows.
fn child() {
    // The watcher found the group's limit (it starts before `main`; its discovery is quick).
    let mut near = jeprof_shim::stats().near_limit;
    for _ in 0..1000 {
        if near.watch != NearLimitWatch::Off {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        near = jeprof_shim::stats().near_limit;
    }
    assert_eq!(near.watch, NearLimitWatch::Eventfd, "{near:?}");
    assert_eq!(
        (near.limit_bytes, near.cgroup_version),
        (LIMIT, 1),
        "{near:?}"
    );
    assert_eq!(near.threshold_bytes, (LIMIT as f64 * 0.8).ceil() as u64);
    assert!(near.use_bytes > 0 && near.last_dump.is_none(), "{near:?}");
    // By hand only: idle this long first, to measure what the watching costs while nothing
    // happens (the manual's figure reads the watcher thread's /proc counters meanwhile).
    let idle: u64 = std::env::var("NEAR_LIMIT_IDLE_SECONDS").map_or(0, |s| s.parse().unwrap());
    std::thread::sleep(Duration::from_secs(idle));
    let steady = steady_site();
    let mut held = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let due = (start.elapsed().as_secs_f64() * RATE) as usize / BLOCK;
        while held.len() < due {
            held.push(grow_site());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    black_box((&steady, &held));
    std::process::exit(3);
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let runs: usize = std::env::var("NEAR_LIMIT_RUNS").map_or(2, |n| n.parse().unwrap());
    let name = format!("jeprof-near-limit-{}", std::process::id());
    let Some(group) = memory_cgroup::for_test(&name, LIMIT) else {
        return;
    };
    for run in 0..runs {
        one_run(&group, run);
    }
    println!("near_limit_oom: {runs} runs, each dumped before the kill and named grow_site");
}

/// One child grown into the limit; checks its near-limit dump and prints what the note reports.
fn one_run(group: &memory_cgroup::MemoryCgroup, run: usize) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let prefix = dir.path().join("app");
    let settings = format!("dump_near_limit:0.8,dump_prefix:{}", prefix.display());
    let ended = group.run(
        &exe,
        &[],
        &[(CHILD, "1"), ("JEPROF_SHIM", settings.as_str())],
    );
    let killed_at = SystemTime::now() - ended.ended.elapsed();
    assert_eq!(
        ended.status.signal(),
        Some(libc::SIGKILL),
        "run {run}: the child was not killed: {:?}",
        ended.status
    );
    let dump = memory_cgroup::near_limit_dump(dir.path(), "app", ended.pid);
    let profile = read::parse(&std::fs::read(&dump).unwrap()).unwrap();
    let note = |key: &str| {
        profile
            .annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {key} in {}", dump.display()))
    };
    assert_eq!(note("shim_near_limit_limit_bytes"), LIMIT.to_string());
    assert_eq!(
        note("shim_near_limit_cgroup"),
        format!("/{}", group_name(group))
    );
    assert_eq!(note("shim_near_limit_cgroup_version"), "1");
    assert_eq!(note("shim_near_limit_signal"), "threshold");
    let used: u64 = note("shim_near_limit_use_bytes").parse().unwrap();
    assert!(used >= LIMIT / 10 * 8, "use {used} below 0.8 of the limit");
    let written = std::fs::metadata(&dump).unwrap().modified().unwrap();
    let before_kill = killed_at.duration_since(written).unwrap_or_default();
    let signalled = SystemTime::UNIX_EPOCH
        + Duration::from_millis(note("shim_near_limit_unix_ms").parse().unwrap());
    let writing = written.duration_since(signalled).unwrap_or_default();
    let rows = top_functions(&dump, &exe);
    assert!(
        rows[0].0.contains("grow_site"),
        "run {run}: the top site is not grow_site: {rows:?}"
    );
    println!(
        "run {run}: {} written {:.0} ms before the kill (oom_kill {}), use {used} B; \
         mtime − signal {:.1} ms, snapshot {} B, file {} B; in-use {:.0} B; top: {:?}",
        dump.display(),
        before_kill.as_secs_f64() * 1e3,
        ended.oom_kills,
        writing.as_secs_f64() * 1e3,
        note("shim_near_limit_snapshot_heap_bytes"),
        std::fs::metadata(&dump).unwrap().len(),
        profile
            .stacks
            .iter()
            .map(|s| s.counts.inuse.bytes)
            .sum::<f64>(),
        &rows[..rows.len().min(3)],
    );
}

fn group_name(group: &memory_cgroup::MemoryCgroup) -> String {
    group
        .dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// jeprof-compat's report of the in-use figures, user functions, largest first: (name, bytes).
fn top_functions(dump: &Path, program: &Path) -> Vec<(String, f64)> {
    let options = ReportOptions {
        show_bytes: true,
        attribution: Attribution::user_code(),
        ..ReportOptions::default()
    };
    let symbolize = SymbolizeOptions {
        binary: Some(program.to_path_buf()),
        ..SymbolizeOptions::default()
    };
    let table = report::build_files(
        &[dump.to_path_buf()],
        &symbolize,
        &options,
        &ReadPolicy::default(),
    )
    .unwrap();
    let mut text = Vec::new();
    table.write_text(&options, &mut text).unwrap();
    // `flat flat% sum% cum cum% function`, after the `Total:` line.
    String::from_utf8(text)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.len() >= 6).then(|| (words[5..].join(" "), words[0].parse().unwrap_or(0.0)))
        })
        .collect()
}
