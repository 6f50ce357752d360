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
    assert!(
        lines[1].starts_with(
            "Decided by the 12 dumps read from series-7-00.heap (dump 0) to \
             series-7-11.heap (dump 11)."
        ),
        "{table}"
    );
    assert!(lines[2].contains("growth/h (95%)") && lines[2].contains("100.0 MiB reached in"));
    assert!(lines[3].ends_with("  fn_1"), "{table}");
    assert_eq!(lines.len(), 4, "{table}");

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

/// `leaking_series`' dumps as raw jemalloc writes them: no labels, named
/// `jeprof.779.<seq>.i<seq>.heap`, in `dir`; with `exit`, a last dump `jeprof.779.12.f.heap` taken
/// after the process freed its leak (hour 0's heap again).
fn jemalloc_named_series(dir: &std::path::Path, exit: bool) -> Vec<PathBuf> {
    let labelled = common::leaking_series(dir, "779");
    let mut dumps = Vec::new();
    for (seq, path) in labelled.iter().enumerate() {
        let mut profile = jeprof_dumpfmt::read::read_file(path).unwrap();
        profile.labels.clear();
        let named = dir.join(format!("jeprof.779.{seq}.i{seq}.heap"));
        jeprof_dumpfmt::write::write_file(&profile, &named, &Default::default()).unwrap();
        std::fs::remove_file(path).unwrap();
        dumps.push(named);
    }
    if exit {
        let exit_dump = dir.join("jeprof.779.12.f.heap");
        std::fs::copy(&dumps[0], &exit_dump).unwrap();
        dumps.push(exit_dump);
    }
    // As a shell's glob gives them: by name, `.10.` and `.11.` before `.2.`.
    dumps.sort();
    dumps
}

#[test]
fn an_untimed_jemalloc_series_is_read_in_sequence_order_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = jemalloc_named_series(dir.path(), false);
    assert!(dumps[2].ends_with("jeprof.779.10.i10.heap"), "{dumps:?}");
    let table = run_ok(&args(&dumps, &[]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("Leak suspects: 1 of 3 functions")
            && lines[0].contains("ordered by the sequence numbers of their file names"),
        "{table}"
    );
    assert!(
        lines[1].contains("jeprof.779.0.i0.heap (dump 0) to jeprof.779.11.i11.heap (dump 11)."),
        "{table}"
    );
    assert!(table.trim_end().ends_with("  fn_1"), "{table}");
}

#[test]
fn an_exit_dump_is_shown_but_hides_no_leak_and_the_summary_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = jemalloc_named_series(dir.path(), true);
    let table = run_ok(&args(&dumps, &[]));
    assert!(
        table.starts_with("Leak suspects: 1 of 3 functions") && table.contains("from 13 of 13"),
        "{table}"
    );
    assert!(
        table.contains(
            "to jeprof.779.11.i11.heap (dump 11); the last, jeprof.779.12.f.heap, is the exit \
             dump by its name (kind f): shown, not tested"
        ),
        "{table}"
    );
    assert!(table.trim_end().ends_with("  fn_1"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&args(&dumps, &["--json"]))).unwrap();
    assert_eq!(json["decided_by"]["dumps"], 12, "{json}");
    assert!(
        json["exit_dump"]["path"]
            .as_str()
            .unwrap()
            .ends_with("jeprof.779.12.f.heap"),
        "{json}"
    );
}

#[test]
fn a_last_dump_holding_under_half_the_heap_is_taken_as_the_exit_dump() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = common::leaking_series(dir.path(), "7");
    // Hour 12: the process let go of the leak (hour 0's heap, at hour 12's time).
    let mut profile = jeprof_dumpfmt::read::read_file(&dumps[0]).unwrap();
    let moment = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_507_200 + 3600 * 12);
    jeprof_dumpfmt::labels::set(
        &mut profile.labels,
        "time",
        &jeprof_dumpfmt::labels::rfc3339_utc(moment),
    );
    let last = dir.path().join("series-7-12.heap");
    jeprof_dumpfmt::write::write_file(&profile, &last, &Default::default()).unwrap();
    dumps.push(last);
    let table = run_ok(&args(&dumps, &[]));
    assert!(
        table.starts_with("Leak suspects: 1 of 3 functions"),
        "{table}"
    );
    assert!(
        table.contains(
            "the last, series-7-12.heap, is taken as the exit dump: the process's live bytes \
             fell from"
        ),
        "{table}"
    );
    assert!(table.trim_end().ends_with("  fn_1"), "{table}");
}

#[test]
fn an_exit_dump_with_too_few_dumps_before_it_is_tested_and_the_summary_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let keep = |d: &PathBuf| {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        [
            "jeprof.779.0.",
            "jeprof.779.1.",
            "jeprof.779.2.",
            "jeprof.779.3.",
            "jeprof.779.12.",
        ]
        .iter()
        .any(|p| name.starts_with(p))
    };
    let dumps: Vec<PathBuf> = jemalloc_named_series(dir.path(), true)
        .into_iter()
        .filter(keep)
        .collect();
    assert_eq!(dumps.len(), 5, "{dumps:?}");
    let table = run_ok(&args(&dumps, &[]));
    assert!(
        table.contains(
            "the last, jeprof.779.12.f.heap, is the exit dump by its name (kind f), but too few \
             dumps come before it for the test without it: it was tested"
        ),
        "{table}"
    );
}
