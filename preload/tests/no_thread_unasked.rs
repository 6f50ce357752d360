//! A process that asks for nothing periodic starts no thread (issue 38 item 2): `true` preloaded
//! with the default settings creates none, while the same `true` with `leak_interval` given
//! starts the leak history's recorder (which shows that the count sees the profiler's threads).
//! Threads are counted by a small library preloaded before the profiler's, whose
//! `pthread_create` writes a line per call (`tests/programs/count_threads.c`).

mod common;

use std::path::Path;
use std::process::Command;

use common::{compile, preload_library, program_source, run_ok};

/// Builds the counting library into `dir`.
fn counting_library(dir: &Path) -> std::path::PathBuf {
    let library = dir.join("libcount_threads.so");
    compile(
        &jeprof_conformance::target_c_compiler(),
        &[program_source("count_threads.c")],
        &["-O2", "-shared", "-fPIC"],
        &library,
    );
    library
}

/// The threads `true` created, preloaded with the counter then the profiler, with `settings`.
fn threads_started_by_true(dir: &Path, counter: &Path, settings: &str, name: &str) -> usize {
    let log = dir.join(name);
    let mut command = Command::new("true");
    command
        .env(
            "LD_PRELOAD",
            format!("{}:{}", counter.display(), preload_library().display()),
        )
        .env("JEPROF_SHIM", settings)
        .env("COUNT_THREADS_FILE", &log);
    run_ok(command);
    std::fs::read_to_string(&log).map_or(0, |text| text.lines().count())
}

#[test]
fn a_preloaded_true_starts_no_thread_unless_a_setting_asks() {
    let dir = tempfile::tempdir().unwrap();
    let counter = counting_library(dir.path());
    assert_eq!(
        threads_started_by_true(dir.path(), &counter, "", "default.log"),
        0,
        "a preloaded `true` with the default settings started a thread"
    );
    assert_eq!(
        threads_started_by_true(dir.path(), &counter, "leak_interval:60", "asked.log"),
        1,
        "with leak_interval given, the leak history's recorder should start (one thread)"
    );
}
