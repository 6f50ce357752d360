//! The command line of jeprof's other views and filters: what a user gets wrong is an error that
//! says what and where, with exit status 2. (Their output against the real jeprof is in
//! `golden.rs`.)

mod common;

fn fails_with(args: &[&str], words: &[&str]) {
    let out = common::run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    for w in words {
        assert!(stderr.contains(w), "{args:?}: {w:?} not in {stderr}");
    }
}

#[test]
fn bad_view_options_are_errors_naming_the_option() {
    let dump = common::fixtures().join("symbolized.heap");
    let dump = dump.to_str().unwrap();
    fails_with(&["report", "--thread", "x", dump], &["--thread", "'*'"]);
    fails_with(&["report", "--ignore", "(", dump], &["--ignore", "regex"]);
    fails_with(&["report", "--retain", "[", dump], &["--retain", "regex"]);
    fails_with(&["report", "--exclude", "(", dump], &["--exclude", "regex"]);
    fails_with(
        &["report", "--base", "/nonexistent/base.heap", dump],
        &["/nonexistent/base.heap"],
    );
    let svg = tempfile::tempdir().unwrap();
    let svg = svg.path().join("out.svg");
    fails_with(
        &[
            "report",
            "--flamegraph",
            svg.to_str().unwrap(),
            "--base",
            dump,
            dump,
        ],
        &["--flamegraph", "--base"],
    );
    assert!(!svg.exists());
}

#[test]
fn a_dump_minus_itself_reports_nothing_and_a_missing_thread_says_so() {
    let dump = common::fixtures().join("symbolized.heap");
    let dump = dump.to_str().unwrap();
    // Every stack cancels: jeprof prints no `Total:` line for a zero total, and no rows.
    assert_eq!(common::run_ok(&["report", "--base", dump, dump]), "");
    let out = common::run(&["report", "--thread", "9", dump]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such thread"));
}
