//! `dump_near_limit` in an unmodified C program (`programs/near_limit.c`), preloaded: grown at
//! about 400 MB/s inside a cgroup v1 memory group with a 400 MiB limit until the OOM killer ends
//! it, it leaves a near-limit dump that names `grow_site` first (symbolized afterwards by
//! jeprof-compat from the program: the dump is written without symbols) and carries the limit
//! and the use. `NEAR_LIMIT_RUNS` children (default 2). Needs root and the v1 memory
//! controller; under `CI=true` a machine without them fails the test. x86_64 only (jeprof-compat
//! is a dev-dependency there alone).
#![cfg(target_arch = "x86_64")]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use jeprof_compat::attribution::Attribution;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::{ReadPolicy, SymbolizeOptions};
use jeprof_conformance::memory_cgroup::{self, MemoryCgroup};

const LIMIT: u64 = 400 << 20;

#[test]
fn a_preloaded_c_program_grown_into_its_cgroup_limit_leaves_a_dump_naming_the_growing_site() {
    let runs: usize = std::env::var("NEAR_LIMIT_RUNS").map_or(2, |n| n.parse().unwrap());
    let name = format!("jeprof-preload-near-limit-{}", std::process::id());
    let Some(group) = memory_cgroup::for_test(&name, LIMIT) else {
        return;
    };
    let build = tempfile::tempdir().unwrap();
    let program = build.path().join("near_limit");
    let cc = jeprof_conformance::target_c_compiler();
    common::compile(
        &cc,
        &[common::program_source("near_limit.c")],
        common::PROGRAM_FLAGS,
        &program,
    );
    for run in 0..runs {
        one_run(&group, &program, run);
    }
}

fn one_run(group: &MemoryCgroup, program: &Path, run: usize) {
    let dir = tempfile::tempdir().unwrap();
    // `program:` keeps the shell that moves the child into the group from profiling itself.
    let settings = format!(
        "program:near_limit,dump_near_limit:0.8,dump_prefix:{}/app",
        dir.path().display()
    );
    let library = common::preload_library();
    let ended = group.run(
        program,
        &[],
        &[
            ("LD_PRELOAD", library.to_str().unwrap()),
            ("JEPROF_SHIM", settings.as_str()),
        ],
    );
    let killed_at = SystemTime::now() - ended.ended.elapsed();
    assert_eq!(
        ended.status.signal(),
        Some(libc::SIGKILL),
        "run {run}: not killed: {:?}",
        ended.status
    );
    let dump = memory_cgroup::near_limit_dump(dir.path(), "app", ended.pid);
    let profile = common::read_dump(&dump);
    let note = |key: &str| common::annotation(&profile, key).map(str::to_string);
    assert_eq!(note("shim_near_limit_limit_bytes"), Some(LIMIT.to_string()));
    assert_eq!(note("shim_near_limit_signal").as_deref(), Some("threshold"));
    let used: u64 = note("shim_near_limit_use_bytes").unwrap().parse().unwrap();
    assert!(used >= LIMIT / 10 * 8, "use {used} below 0.8 of the limit");
    let rows = top_functions(&dump, program);
    assert!(
        rows[0].0 == "grow_site",
        "run {run}: the top site is not grow_site: {rows:?}"
    );
    let written = std::fs::metadata(&dump).unwrap().modified().unwrap();
    let before_kill = killed_at.duration_since(written).unwrap_or_default();
    let signalled = SystemTime::UNIX_EPOCH
        + Duration::from_millis(note("shim_near_limit_unix_ms").unwrap().parse().unwrap());
    let writing = written.duration_since(signalled).unwrap_or_default();
    println!(
        "run {run}: {} written {:.0} ms before the kill (oom_kill {}), use {used} B; \
         mtime − signal {:.1} ms, snapshot {} B, file {} B; in-use {:.0} B; top: {:?}",
        dump.display(),
        before_kill.as_secs_f64() * 1e3,
        ended.oom_kills,
        writing.as_secs_f64() * 1e3,
        note("shim_near_limit_snapshot_heap_bytes").unwrap_or_default(),
        std::fs::metadata(&dump).unwrap().len(),
        profile
            .stacks
            .iter()
            .map(|s| s.counts.inuse.bytes)
            .sum::<f64>(),
        &rows[..rows.len().min(3)],
    );
}

/// jeprof-compat's report of the in-use figures by user function, largest first.
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
