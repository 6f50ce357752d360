//! Settings as people type them, seen from `JEPROF_SHIM` in a child process (the settings are
//! read before `main`): `program` lets the programs it does not name pass through (no sampling,
//! no threads, no dumps) and profiles the one it names, sizes take units, a directory given as
//! `dump_on_exit` is refused when read, and a `dump_prefix` ending in `%p` names the pid once.
//! Each test re-runs this binary, filtered to itself, with `SETTINGS_CHILD` set.

use std::path::Path;
use std::process::Output;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const CHILD: &str = "SETTINGS_CHILD";

/// Runs `test` of this binary in a child with `JEPROF_SHIM=settings`.
fn run_child(test: &str, settings: &str) -> Output {
    jeprof_conformance::target_command(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("JEPROF_SHIM", settings)
        .output()
        .unwrap()
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// The names of this process's threads that the profiler started (`jeprof-…`).
fn profiler_threads() -> Vec<String> {
    let mut names = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = task.unwrap().path().join("comm");
        let name = std::fs::read_to_string(comm).unwrap_or_default();
        if name.starts_with("jeprof-") {
            names.push(name.trim().to_string());
        }
    }
    names
}

/// Allocates 8 MiB in 4 KiB blocks, kept live.
fn allocate() -> Vec<Vec<u8>> {
    (0..2048).map(|i| vec![i as u8; 4096]).collect()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn this_binary() -> String {
    let exe = std::env::current_exe().unwrap();
    exe.file_name().unwrap().to_string_lossy().into_owned()
}

fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "child failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_program_that_program_does_not_name_passes_through_with_no_samples_threads_or_dumps() {
    const TEST: &str =
        "a_program_that_program_does_not_name_passes_through_with_no_samples_threads_or_dumps";
    if in_child() {
        let blocks = allocate();
        let stats = jeprof_shim::stats();
        assert_eq!(stats.samples_taken, 0, "{stats:?}");
        assert!(!stats.active, "{stats:?}");
        assert_eq!(profiler_threads(), Vec::<String>::new());
        drop(blocks);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let out = run_child(
        TEST,
        &format!(
            "program:redis-server|bash,sample_rate:4k,dump_on_exit:{d}/exit.heap,\
             dump_prefix:{d}/app,dump_interval:64k,dump_final:true,leak_interval:1"
        ),
    );
    succeeded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("invalid configuration"), "{stderr}");
    assert_eq!(files_in(dir.path()), Vec::<String>::new());
}

#[test]
fn the_program_that_program_names_is_profiled_with_sizes_in_units() {
    const TEST: &str = "the_program_that_program_names_is_profiled_with_sizes_in_units";
    if in_child() {
        let blocks = allocate();
        let stats = jeprof_shim::stats();
        assert_eq!(stats.sample_rate, 4096, "sample_rate:4k is 4096 bytes");
        assert!(stats.samples_taken > 0, "{stats:?}");
        // The leak history's recorder, asked for by `leak_interval`, started before `main`
        // (`comm` keeps 15 bytes of "jeprof-shim-leaks").
        let threads = profiler_threads();
        assert!(
            threads.iter().any(|t| t == "jeprof-shim-lea"),
            "{threads:?}"
        );
        drop(blocks);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let program = this_binary();
    let out = run_child(
        TEST,
        &format!(
            "program:bash|{program},sample_rate:4k,dump_on_exit:{d}/exit.heap,leak_interval:1"
        ),
    );
    succeeded(&out);
    assert_eq!(files_in(dir.path()), vec!["exit.heap".to_string()]);
}

#[test]
fn a_directory_given_as_dump_on_exit_is_refused_when_read_with_what_to_name() {
    const TEST: &str = "a_directory_given_as_dump_on_exit_is_refused_when_read_with_what_to_name";
    if in_child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = run_child(TEST, &format!("dump_on_exit:{}", dir.path().display()));
    succeeded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a directory: name a file in it")
            && stderr.contains("(in JEPROF_SHIM; those keys keep their defaults)"),
        "{stderr}"
    );
    assert_eq!(files_in(dir.path()), Vec::<String>::new());
}

#[test]
fn a_dump_prefix_ending_in_pct_p_names_the_pid_once() {
    const TEST: &str = "a_dump_prefix_ending_in_pct_p_names_the_pid_once";
    if in_child() {
        let path = jeprof_shim::dump_next().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, format!("redis.{}.0.m0.heap", std::process::id()));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = run_child(
        TEST,
        &format!("dump_prefix:{}/redis.%p", dir.path().display()),
    );
    succeeded(&out);
    let names = files_in(dir.path());
    assert_eq!(names.len(), 1, "{names:?}");
    let parts: Vec<&str> = names[0].split('.').collect();
    assert_eq!(parts.len(), 5, "redis.<pid>.<seq>.m<n>.heap: {names:?}");
}
