//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// `fixtures/compat/` in the workspace.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/compat")
}

/// The real jemalloc dump in `shared/real-dumps/` (beside the project root), if present. CI has it;
/// under `CI=true` its absence is a failure.
pub fn real_dump() -> Option<PathBuf> {
    let candidates = [
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/real-dumps/pprof-pr690-jemalloc.heap"),
        PathBuf::from("/work/shared/real-dumps/pprof-pr690-jemalloc.heap"),
    ];
    let found = candidates.into_iter().find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "shared/real-dumps/pprof-pr690-jemalloc.heap is missing under CI"
        );
        eprintln!("notice: shared/real-dumps/pprof-pr690-jemalloc.heap not found; skipping cases that read it");
    }
    found
}

/// Runs the built `jeprof-compat` binary.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(args)
        .output()
        .expect("the jeprof-compat binary runs")
}

/// Runs it and returns stdout, failing the test on a non-zero exit.
pub fn run_ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "jeprof-compat {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}
