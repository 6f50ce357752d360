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
    fails_with(&["report", "--list", "main", dump], &["--list", "--binary"]);
    fails_with(
        &[
            "report",
            "--list",
            "main",
            "--binary",
            "/nonexistent/prog",
            dump,
        ],
        &["/nonexistent/prog", "cannot read the program"],
    );
    fails_with(&["report", "--list", "(", dump], &["--list", "regex"]);
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

#[test]
fn callgrind_output_is_read_by_callgrind_annotate_with_the_reports_figures() {
    let fixtures = common::fixtures();
    let out = common::run_ok(&[
        "report",
        "--callgrind",
        "--binary",
        fixtures.join("prog").to_str().unwrap(),
        fixtures.join("nonpie.heap").to_str().unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("callgrind.out");
    std::fs::write(&file, &out).unwrap();
    // valgrind's own reader; CI installs valgrind.
    let annotated = std::process::Command::new("callgrind_annotate")
        .arg("--auto=no")
        .arg(&file)
        .output()
        .expect("callgrind_annotate (the valgrind package) runs");
    let text = String::from_utf8_lossy(&annotated.stdout);
    assert!(
        annotated.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&annotated.stderr)
    );
    // The leaf's own cost is the whole report's total (`report --show_bytes`: 26105418 B), on
    // the function DWARF names, in the C source file.
    assert!(
        text.contains("26,105,418 (100.0%)  PROGRAM TOTALS"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("26,105,418") && l.ends_with("prog.c:leaf_alloc")),
        "{text}"
    );
}

#[test]
fn svg_is_the_dot_graph_drawn_by_graphviz_and_says_to_install_it_when_missing() {
    let dump = common::fixtures().join("symbolized.heap");
    let dump = dump.to_str().unwrap();
    // Graphviz's `dot` (CI installs graphviz).
    let svg = common::run_ok(&["report", "--svg", dump]);
    assert!(svg.starts_with("<?xml"), "{svg}");
    assert!(svg.contains("<title>fixture; 59.3 MB</title>"), "{svg}");
    // Every node of the --dot graph is drawn (labels split at `::`).
    let graph = common::run_ok(&["report", "--dot", dump]);
    assert!(
        graph.contains("label=\"leaf_alloc\\n2.1 (3.5%)\\r\""),
        "{graph}"
    );
    for name in ["leaf_alloc", "push_back", "worker_loop", "mid_b"] {
        assert!(svg.contains(&format!(">{name}</text>")), "{name} not drawn");
    }

    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(["report", "--svg", dump])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("install graphviz"));
}

#[test]
fn pie_dumps_list_and_line_through_their_memory_map_as_non_pie_ones() {
    // `prog` and `prog_pie` are one source built both ways, and `pie.heap` / `nonpie.heap` the
    // same stacks at their own addresses (the PIE one loaded at 0x555555554000): through the
    // memory map, the PIE dump's lines and listings are the non-PIE one's (whose are goldens).
    // Run inside `fixtures/compat`, as the goldens are: `prog`'s DWARF names its source relative
    // to the directory the tools run in (`/proc/self/cwd/prog.c`), so the listing is there to check.
    let f = common::fixtures();
    let run = |view: &[&str], program: &str, dump: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
            .current_dir(&f)
            .arg("report")
            .args(view)
            .args(["--binary", program, dump])
            .output()
            .expect("the jeprof-compat binary runs");
        assert!(
            out.status.success(),
            "jeprof-compat report {view:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    };
    let lines = run(&["--lines", "--show_bytes"], "prog_pie", "pie.heap");
    assert_eq!(
        lines,
        run(&["--lines", "--show_bytes"], "prog", "nonpie.heap")
    );
    assert!(lines.contains("prog.c:3"), "no prog.c line in {lines}");
    let list = run(&["--list", "."], "prog_pie", "pie.heap");
    assert_eq!(list, run(&["--list", "."], "prog", "nonpie.heap"));
    assert!(list.contains("leaf_alloc in "), "{list}");
    assert!(list.contains("prog.c"), "{list}");
}
