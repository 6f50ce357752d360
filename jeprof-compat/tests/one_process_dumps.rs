//! Several dumps of one process given to `report` and `merge`: added up as jeprof adds them, with a
//! warning on standard error saying how many and what to do; to `export`: rows of each dump, with a
//! warning that they are a series; `--latest-per-process`
//! reads each process's last dump in series order; `diff` says when BASE was written after NEW.
//! And `report` of an empty heap prints what jeprof prints (nothing) and says why on standard
//! error.

mod common;

use std::path::{Path, PathBuf};

/// Three dumps of process `pid` (labels, no time), each heap a step larger, named as jemalloc
/// names them (`jeprof.<pid>.<seq>.i<seq>.heap`; seq 10 sorts before 2 as a string), in `dir`.
fn periodic_dumps(dir: &Path, pid: u32) -> Vec<PathBuf> {
    [2u64, 9, 10]
        .iter()
        .map(|&seq| {
            let mut profile = common::generated_profile(
                &[(vec![1, 9], 10.0 * seq as f64, 40_000.0 * seq as f64)],
                512 << 10,
                0x40_0000,
            );
            profile.labels = vec![("pid".into(), pid.to_string())];
            let path = dir.join(format!("jeprof.{pid}.{seq}.i{seq}.heap"));
            jeprof_dumpfmt::write::write_file(&profile, &path, &Default::default()).unwrap();
            path
        })
        .collect()
}

fn strings(args: &[&str], dumps: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    out.extend(dumps.iter().map(|d| d.display().to_string()));
    out
}

/// Runs jeprof-compat, requiring success: (stdout, stderr).
fn run(args: &[String]) -> (String, String) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::run(&refs);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// The `Total: N B` of `report --show_bytes` of `dumps` (and any other options).
fn total(options: &[&str], dumps: &[PathBuf]) -> f64 {
    let mut args = vec!["report", "--show_bytes"];
    args.extend(options);
    let (table, _) = run(&strings(&args, dumps));
    let line = table.lines().next().unwrap_or_default();
    let figure = line
        .strip_prefix("Total: ")
        .and_then(|l| l.strip_suffix(" B"));
    figure.unwrap_or_else(|| panic!("{table}")).parse().unwrap()
}

/// The sum of each dump's own total, within the integers' rounding.
fn assert_sum_of(got: f64, dumps: &[&PathBuf]) {
    let want: f64 = dumps
        .iter()
        .map(|&d| total(&[], std::slice::from_ref(d)))
        .sum();
    assert!((got - want).abs() <= dumps.len() as f64, "{got} != {want}");
}

const WARNING: &str = "3 of the 4 dumps come from 1 process with several dumps each";

#[test]
fn report_of_one_process_dumps_adds_them_up_as_jeprof_and_warns_with_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = periodic_dumps(dir.path(), 779);
    dumps.extend(periodic_dumps(dir.path(), 780).into_iter().take(1));
    let (_, stderr) = run(&strings(&["report", "--show_bytes"], &dumps));
    // jeprof's sum: every dump's figures added.
    assert_sum_of(total(&[], &dumps), &dumps.iter().collect::<Vec<_>>());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(WARNING) && stderr.contains("--latest-per-process"),
        "{stderr}"
    );
}

#[test]
fn report_latest_per_process_reads_each_process_last_dump_by_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = periodic_dumps(dir.path(), 779);
    let other = periodic_dumps(dir.path(), 780);
    dumps.push(other[0].clone());
    let (_, stderr) = run(&strings(
        &["report", "--show_bytes", "--latest-per-process"],
        &dumps,
    ));
    assert!(stderr.is_empty(), "{stderr}");
    // Seq 10 of 779, not seq 9 (which sorts last as a string), and 780's one dump.
    assert!(dumps[1].ends_with("jeprof.779.9.i9.heap"));
    let got = total(&["--latest-per-process"], &dumps);
    assert_sum_of(got, &[&dumps[2], &other[0]]);
}

#[test]
fn merge_warns_of_one_process_dumps_and_latest_per_process_merges_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = periodic_dumps(dir.path(), 779);
    dumps.push(periodic_dumps(dir.path(), 780)[0].clone());
    let out = dir.path().join("merged.prof");
    let out_arg = out.display().to_string();
    let (_, stderr) = run(&strings(&["merge", "-o", &out_arg], &dumps));
    assert!(stderr.contains(WARNING), "{stderr}");
    let merged = || total(&[], std::slice::from_ref(&out));
    assert_sum_of(merged(), &dumps.iter().collect::<Vec<_>>());
    let (_, stderr) = run(&strings(
        &["merge", "--latest-per-process", "-o", &out_arg],
        &dumps,
    ));
    assert!(stderr.is_empty(), "{stderr}");
    assert_sum_of(merged(), &[&dumps[2], &dumps[3]]);
}

#[test]
fn export_says_one_process_dumps_are_a_series_not_a_sum() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = periodic_dumps(dir.path(), 779);
    dumps.push(periodic_dumps(dir.path(), 780)[0].clone());
    let out = dir.path().join("rows.parquet").display().to_string();
    let (_, stderr) = run(&strings(&["export", "-o", &out], &dumps));
    assert!(stderr.contains(WARNING), "{stderr}");
    assert!(stderr.contains("their rows are a series"), "{stderr}");
    assert!(!stderr.contains("added up"), "{stderr}");
    let (_, stderr) = run(&strings(
        &["export", "--latest-per-process", "-o", &out],
        &dumps,
    ));
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn dumps_of_different_processes_are_added_up_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let dumps: Vec<PathBuf> = (1..=3)
        .map(|pid| periodic_dumps(dir.path(), pid)[0].clone())
        .collect();
    let (_, stderr) = run(&strings(&["report", "--show_bytes"], &dumps));
    assert!(stderr.is_empty(), "{stderr}");
    assert_sum_of(total(&[], &dumps), &dumps.iter().collect::<Vec<_>>());
}

#[test]
fn report_of_an_empty_heap_prints_what_jeprof_prints_and_says_why() {
    let empty = common::fixtures().join("empty.heap");
    let (table, stderr) = run(&strings(&["report"], &[empty]));
    assert_eq!(table, "", "jeprof --text prints nothing for an empty heap");
    assert!(
        stderr.contains("empty.heap: the total of inuse_space is 0 (an empty heap"),
        "{stderr}"
    );
}

#[test]
fn diff_warns_when_base_was_written_after_new_by_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = periodic_dumps(dir.path(), 779);
    // seq 2 then seq 10: the right order, though "10" sorts first as a string.
    let (_, stderr) = run(&strings(&["diff"], &[dumps[0].clone(), dumps[2].clone()]));
    assert!(stderr.is_empty(), "{stderr}");
    let (_, stderr) = run(&strings(&["diff"], &[dumps[2].clone(), dumps[0].clone()]));
    assert!(
        stderr.contains("jeprof.779.10.i10.heap was written after NEW")
            && stderr.contains("give the earlier dump first"),
        "{stderr}"
    );
}
