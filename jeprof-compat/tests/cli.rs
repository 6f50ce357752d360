//! The binary as a user meets it: bad input gives one line on stderr and exit status 2, a closed
//! pipe is not an error, help teaches, every subcommand writes what it says.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

fn fixture(name: &str) -> String {
    common::fixtures().join(name).display().to_string()
}

/// Runs a command expected to fail on input; returns its single stderr line.
fn fails_with_one_line(args: &[&str]) -> String {
    let out = common::run(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} should exit 2; stdout {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one line on stderr, got {err:?}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_inputs_exit_2_with_one_line_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n).display().to_string();

    let err = fails_with_one_line(&["report", &path("missing.heap")]);
    assert!(
        err.contains("missing.heap") && err.contains("No such file"),
        "{err}"
    );

    std::fs::write(path("text.heap"), "hello world\n").unwrap();
    let err = fails_with_one_line(&["report", &path("text.heap")]);
    assert!(
        err.contains("text.heap") && err.contains("not a jemalloc heap_v2 dump"),
        "{err}"
    );

    std::fs::write(path("empty.heap"), "").unwrap();
    let err = fails_with_one_line(&["report", &path("empty.heap")]);
    assert!(err.contains("empty.heap") && err.contains("empty"), "{err}");

    // Truncated in the middle of a counts line.
    let whole = std::fs::read_to_string(fixture("a.heap")).unwrap();
    let cut = &whole[..whole.rfind(']').unwrap()];
    std::fs::write(path("truncated.heap"), cut).unwrap();
    let err = fails_with_one_line(&["report", &path("truncated.heap")]);
    let last_line = cut.lines().count();
    assert!(
        err.contains(&format!("truncated.heap:{last_line}:")),
        "{err}"
    );
    assert!(
        err.contains("truncated dump") && err.contains("cut"),
        "{err}"
    );

    // A broken line in the middle.
    std::fs::write(
        path("broken.heap"),
        "heap_v2/524288\n  t*: 1: 2 [0: 0]\n@ 0x1 0xZZ\n  t*: 1: 8 [0: 0]\n",
    )
    .unwrap();
    let err = fails_with_one_line(&["report", &path("broken.heap")]);
    assert!(
        err.contains("broken.heap:3:") && err.contains("hexadecimal"),
        "{err}"
    );

    // Objects without bytes: jeprof divides by zero on it.
    std::fs::write(
        path("divzero.heap"),
        "heap_v2/524288\n@ 0x1\n  t*: 1: 0 [0: 0]\n",
    )
    .unwrap();
    let err = fails_with_one_line(&["report", &path("divzero.heap")]);
    assert!(err.contains("divzero.heap:3:"), "{err}");

    // Every subcommand reports the same way.
    fails_with_one_line(&[
        "merge",
        "-o",
        &path("out.heap"),
        &fixture("a.heap"),
        &path("broken.heap"),
    ]);
    fails_with_one_line(&["pprof", "-o", &path("out.pb.gz"), &path("text.heap")]);
    fails_with_one_line(&["diff", &fixture("a.heap"), &path("missing.heap")]);
    fails_with_one_line(&["report", "--focus", "(", &fixture("a.heap")]);
    fails_with_one_line(&[
        "merge",
        "-o",
        &path("no/such/dir/out.heap"),
        &fixture("a.heap"),
    ]);
    assert!(
        !dir.path().join("out.heap").exists(),
        "a failed merge writes nothing"
    );
}

#[test]
fn usage_errors_exit_2() {
    let out = common::run(&[
        "report",
        "--inuse_space",
        "--inuse_objects",
        &fixture("a.heap"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = common::run(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn closed_pipe_is_not_an_error() {
    let Some(real) = common::real_dump() else {
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args([
            "report",
            "--collapsed",
            real.to_str().unwrap(),
            real.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .as_mut()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "exit {status:?}, stderr {err:?}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn help_teaches_with_examples() {
    let top = common::run_ok(&["--help"]);
    for word in [
        "report",
        "merge",
        "pprof",
        "otlp",
        "diff",
        "Examples:",
        "jeprof-compat merge -o fleet.heap",
    ] {
        assert!(top.contains(word), "--help lacks {word:?}:\n{top}");
    }
    let report = common::run_ok(&["report", "--help"]);
    for word in [
        "--show_bytes",
        "--inuse_objects",
        "--focus",
        "--interval",
        "--flamegraph",
        "--binary",
        "Total: 2161886 B",
    ] {
        assert!(report.contains(word), "report --help lacks {word:?}");
    }
}

#[test]
fn report_adds_dumps_and_prints_intervals() {
    let one = common::run_ok(&["report", "--show_bytes", &fixture("a.heap")]);
    let two = common::run_ok(&[
        "report",
        "--show_bytes",
        &fixture("a.heap"),
        &fixture("a.heap"),
    ]);
    let total = |t: &str| -> u64 {
        t.lines().next().unwrap()[7..]
            .trim_end_matches(" B")
            .parse()
            .unwrap()
    };
    assert!(total(&two).abs_diff(2 * total(&one)) <= 1);

    let text = common::run_ok(&["report", "--show_bytes", "--interval", &fixture("a.heap")]);
    let row = text.lines().find(|l| l.ends_with(" leaf_alloc")).unwrap();
    // flat, flat%, sum%, cum, cum%, then [lo, hi] for flat and for cum.
    let flat: f64 = row.split_whitespace().next().unwrap().parse().unwrap();
    let bracket = regex::Regex::new(r"\[(\d+), (\d+)\]").unwrap();
    let intervals: Vec<(f64, f64)> = bracket
        .captures_iter(row)
        .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap()))
        .collect();
    assert_eq!(intervals.len(), 2, "{row}");
    assert!(intervals[0].0 < flat && flat < intervals[0].1, "{row}");
}

#[test]
fn rust_names_come_out_clean_and_allocator_shims_go() {
    let text = common::run_ok(&["report", "--show_bytes", &fixture("rust.heap")]);
    assert!(
        text.contains(" <my_app::Node as core::clone::Clone>::clone\n"),
        "{text}"
    );
    assert!(
        text.contains(" alloc::raw_vec::RawVec<T,A>::grow_one\n"),
        "{text}"
    );
    for shim in [
        "__rust_alloc",
        "GlobalAlloc",
        "alloc::alloc::alloc",
        "::alloc\n",
    ] {
        assert!(!text.contains(shim), "{shim} shown:\n{text}");
    }
    // The numbers do not depend on how names are shown.
    let jeprof_style = common::run_ok(&[
        "report",
        "--show_bytes",
        "--jeprof_names",
        "--keep_alloc_frames",
        &fixture("rust.heap"),
    ]);
    assert_eq!(text.lines().next(), jeprof_style.lines().next());
}

#[test]
fn collapsed_and_flamegraph_outputs() {
    let folded = common::run_ok(&["report", "--collapsed", &fixture("symbolized.heap")]);
    assert!(
        folded.lines().any(|l| l == "main;mid_b;leaf_alloc 829411"),
        "{folded}"
    );
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("heap.svg");
    common::run_ok(&[
        "report",
        "--flamegraph",
        svg.to_str().unwrap(),
        &fixture("symbolized.heap"),
    ]);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg"),
        "not an SVG"
    );
    assert!(
        svg.contains("leaf_alloc") && svg.contains("mid_b"),
        "frames missing from the SVG"
    );
}

#[test]
fn diff_flags_real_growth_and_not_noise() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.heap");
    let new = dir.path().join("new.heap");
    // Same program; `mid_b`'s stack grows 100×, `mid_a`'s stays.
    let stack = |n: u64| {
        format!(
            "--- symbol\n0x40113f leaf_alloc\n0x401149 mid_a\n0x401157 mid_b\n0x401186 main\n---\n--- heap\nheap_v2/524288\n  t*: 0: 0 [0: 0]\n\
             @ 0x40113f 0x40114a 0x401187\n  t*: 400: 3200 [0: 0]\n@ 0x40113f 0x401158 0x401187\n  t*: {n}: {} [0: 0]\nMAPPED_LIBRARIES:\n",
            n * 8
        )
    };
    std::fs::write(&base, stack(40)).unwrap();
    std::fs::write(&new, stack(4000)).unwrap();
    let text = common::run_ok(&[
        "diff",
        "--cum",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    let row = |f: &str| {
        text.lines()
            .find(|l| l.ends_with(&format!(" {f}")))
            .unwrap_or_else(|| panic!("{f} missing:\n{text}"))
            .to_string()
    };
    assert!(row("mid_b").contains(" * "), "growth not flagged:\n{text}");
    assert!(!row("mid_a").contains(" * "), "no change flagged:\n{text}");
    assert!(text.starts_with("Total: base "), "{text}");
}
