//! `jeprof-compat leaks` from the command line: the table, `--json` and `--svg` name the leaking
//! function and not the flat or the cycling one; a series the test cannot read exits 2 saying why.

mod common;

use std::path::PathBuf;

fn args(dumps: &[PathBuf], before: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = std::iter::once("leaks")
        .chain(before.iter().copied())
        .map(str::to_string)
        .collect();
    out.extend(dumps.iter().map(|d| d.display().to_string()));
    out
}

fn run_ok(args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::run_ok(&refs)
}

#[test]
fn the_table_and_the_json_name_the_leak_and_not_the_flat_or_the_cycling_site() {
    let dir = tempfile::tempdir().unwrap();
    // Given out of order: the time labels order them.
    let mut dumps = common::leaking_series(dir.path(), "7");
    dumps.reverse();
    let table = run_ok(&args(&dumps, &["--limit", "100M"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("Leak suspects: 1 of 3 functions"),
        "{table}"
    );
    assert!(
        lines[0].contains("from 12 of 12 dumps over 11.0 h"),
        "{table}"
    );
    assert!(lines[1].contains("growth/h (95%)") && lines[1].contains("100.0 MB reached in"));
    assert!(lines[2].ends_with("  fn_1"), "{table}");
    assert_eq!(lines.len(), 3, "{table}");

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&args(&dumps, &["--json", "--limit", "100M"]))).unwrap();
    let suspects = json["suspects"].as_array().unwrap();
    assert_eq!(suspects.len(), 1, "{json}");
    let leak = &suspects[0];
    assert_eq!(leak["function"], "fn_1");
    // 2,000 objects of 1 KiB an hour.
    let rate = leak["growth_bytes_per_hour"].as_f64().unwrap();
    let interval = leak["growth_bytes_per_hour_95"].as_array().unwrap();
    let (lo, hi) = (interval[0].as_f64().unwrap(), interval[1].as_f64().unwrap());
    assert!(lo < 2_048_000.0 && 2_048_000.0 < hi, "{leak}");
    assert!((rate / 2_048_000.0 - 1.0).abs() < 1e-6, "{leak}");
    assert_eq!(leak["started"], "2026-11-24T08:00:00.000000Z");
    assert!(leak["p_value"].as_f64().unwrap() < 0.05 / 3.0);
    assert!(leak["hours_to_limit"].as_f64().unwrap() > 0.0);
    assert_eq!(json["dumps"], 12);
    assert_eq!(json["sites"], 3);
}

#[test]
fn the_svg_is_one_well_formed_chart_with_the_suspect_marked() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = common::leaking_series(dir.path(), "7");
    let svg = dir.path().join("leaks.svg");
    run_ok(&args(&dumps, &["--svg", &svg.display().to_string()]));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    assert!(text.contains("suspect: fn_1"), "{text}");
    assert!(!text.contains("suspect: fn_3") && text.contains("fn_3"));
}

fn expect_exit_2(args: &[String], wanted: &[&str]) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::run(&refs);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for w in wanted {
        assert!(stderr.contains(w), "{stderr} lacks {w:?}");
    }
}

#[test]
fn too_few_dumps_two_processes_and_bad_options_exit_2_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = common::leaking_series(dir.path(), "7");
    expect_exit_2(
        &args(&dumps[..3], &[]),
        &["3 dumps", "holds 2 dumps", "at least 3"],
    );
    let other = tempfile::tempdir().unwrap();
    let mut two = dumps.clone();
    two.extend(common::leaking_series(other.path(), "8"));
    expect_exit_2(&args(&two, &[]), &["more than one process", "pid"]);
    expect_exit_2(&args(&dumps, &["--fdr", "1.5"]), &["false discovery rate"]);
    expect_exit_2(&args(&dumps, &["--points", "3"]), &["--points"]);
    let missing = dir.path().join("missing.heap");
    expect_exit_2(&args(&[missing], &[]), &["missing.heap"]);
}
