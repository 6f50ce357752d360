//! `report --rss`: per function the in-use, resident, swapped and stranded bytes the dump's
//! `# rss_*` annotations carry, charged as the text report charges in-use bytes, then the RSS
//! reconciled; `--json`'s `sites` array; without jemalloc the stranded column is absent and said
//! so; a dump without the figures is an error naming the file and the annotation.

mod common;

#[path = "common/rss_dump.rs"]
mod rss_dump;

use rss_dump::write_dump;

#[test]
fn rss_report_charges_each_figure_to_the_function_the_table_charges_in_use_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("app.heap");
    write_dump(&dump, Some(true));
    let dump = dump.to_str().unwrap();
    let json = common::run_ok(&["report", "--rss", "--json", dump]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let sites = v["sites"].as_array().unwrap();
    let names: Vec<&str> = sites
        .iter()
        .map(|s| s["function"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fn_1", "fn_3", "fn_4"], "{json}");
    let figure = |i: usize, key: &str| sites[i][key].as_f64().unwrap();
    // In-use bytes are what jeprof reads back from the dump's integer pairs: within its rounding.
    assert!((figure(0, "inuse_bytes") - 40_000.0).abs() < 40.0, "{json}");
    assert_eq!(figure(0, "resident_bytes"), 0.0);
    assert_eq!(figure(1, "resident_bytes"), 8_000.0);
    assert_eq!(figure(1, "swapped_bytes"), 500.0);
    assert_eq!(figure(1, "fragmentation_bytes"), 3_000.0);
    assert_eq!(figure(2, "fragmentation_bytes"), 700.0);
    let (lo, hi) = (
        figure(1, "resident_bytes_lo"),
        figure(1, "resident_bytes_hi"),
    );
    let half = 1.959964 * (80_000.0f64).sqrt();
    assert!((hi - lo - 2.0 * half).abs() < 1.0, "{lo} {hi}");
    // The table's flat in-use figures are the report's.
    let table = common::run_ok(&["report", "--show_bytes", dump]);
    assert!(table.contains("40000"), "{table}");
    assert_eq!(v["totals"]["stranded_bytes"], (2 * 64 - 100) * 64);

    let text = common::run_ok(&["report", "--rss", "--show_bytes", dump]);
    let row = text.lines().find(|l| l.ends_with(" fn_3")).unwrap();
    let fields: Vec<&str> = row.split_whitespace().collect();
    let inuse: f64 = fields[0].parse().unwrap();
    assert!((inuse - 9_000.0).abs() < 10.0, "{row}");
    assert_eq!(fields[1], "8000", "{row}");
    assert_eq!(
        fields[fields.len() - 3..fields.len() - 1],
        ["500", "3000"],
        "{row}"
    );
    let (_, reconciliation) = text.split_once("\n\n").unwrap();
    assert!(
        reconciliation.starts_with("Anonymous RSS 0.2 MiB:"),
        "{text}"
    );
    for part in [
        "stranded in slabs",
        "dirty pages",
        "allocator metadata",
        "the rest",
    ] {
        assert!(reconciliation.contains(part), "{part}: {text}");
    }
}

#[test]
fn without_jemalloc_the_stranded_bytes_are_absent_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("system.heap");
    write_dump(&dump, Some(false));
    let dump = dump.to_str().unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&common::run_ok(&["report", "--rss", "--json", dump])).unwrap();
    assert!(v["sites"][0]["fragmentation_bytes"].is_null(), "{v}");
    assert_eq!(v["sites"][1]["resident_bytes"], 8_000.0);
    assert!(v["stranded"].as_str().unwrap().starts_with("absent"), "{v}");
    let text = common::run_ok(&["report", "--rss", dump]);
    assert!(
        text.contains("stranded: absent, the program's allocator is not jemalloc"),
        "{text}"
    );
    assert!(
        text.contains("absent (the program's allocator is not jemalloc"),
        "{text}"
    );
}

#[test]
fn a_dump_without_residency_figures_is_refused_by_file_and_annotation() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("old.heap");
    write_dump(&dump, None);
    let out = common::run(&["report", "--rss", dump.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("old.heap"), "{err}");
    assert!(err.contains("`rss_page_size` is missing"), "{err}");
    let out = common::run(&[
        "report",
        "--rss",
        dump.to_str().unwrap(),
        dump.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rss reads one dump"));
}
