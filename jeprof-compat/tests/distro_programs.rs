//! Real programs' raw jemalloc dumps, named as the real jeprof names them (issue 37, item 6).
//!
//! Each trial runs one of the distribution's own programs (stripped, as installed: python3, perl,
//! sqlite3, sort, jq, awk) under the distribution's jemalloc (`LD_PRELOAD=libjemalloc.so.2`,
//! `MALLOC_CONF=prof:true,prof_final:true,...`) doing allocation-heavy work, then compares, for
//! its final dump and its last interval dump, `jeprof --text --show_bytes BIN DUMP` (the real
//! jeprof, built from the registry's jemalloc source at test time) with `jeprof-compat report
//! --text --show_bytes --binary BIN DUMP`: the same names (every one), the same figures within
//! 1e-4 relative. Nothing is pinned to a package version: whatever the machine has installed,
//! jeprof is the referee, with the same files at hand (the system debug directory included, so
//! glibc's names come from `libc6-dbg`'s build-id files when it is installed).
//!
//! A missing program or library fails under `CI=true` (`.ci/run` installs them) and skips with
//! a notice elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use jeprof_conformance::{in_ci, parse_text, run, Text};

/// Debian's jemalloc (package `libjemalloc2`).
const LIBJEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

/// Whether `path` exists; when it does not, fails under CI and says why elsewhere.
fn present(path: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    assert!(
        !in_ci(),
        "{path} is missing under CI=true (.ci/run installs python3, perl, sqlite3, coreutils, \
         jq, gawk and libjemalloc2)"
    );
    eprintln!("skipped: {path} is not installed");
    false
}

/// Numbers in a scrambled order, one a line: input for `sort` and `awk`.
fn numbers(dir: &Path) -> PathBuf {
    let path = dir.join("numbers.txt");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = String::new();
    for _ in 0..100_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        text.push_str(&format!("{}\n", x >> 40));
    }
    std::fs::write(&path, text).expect("write numbers");
    path
}

/// Runs `program args` under Debian's jemalloc with profiling on, dumps into `dir`, and returns
/// the dumps to compare: the final one and the last interval dump (live data mid-run).
fn profile(program: &str, args: &[String], dir: &Path) -> Vec<PathBuf> {
    let conf = format!(
        "prof:true,prof_final:true,lg_prof_sample:10,lg_prof_interval:22,prof_prefix:{}/jeprof",
        dir.display()
    );
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("LD_PRELOAD", LIBJEMALLOC)
        .env("MALLOC_CONF", conf)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut finals = Vec::new();
    let mut intervals: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).expect("list dumps").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".heap") {
            continue;
        }
        if name.ends_with(".f.heap") {
            finals.push(path);
        } else if let Some(seq) = name.split('.').nth(2).and_then(|s| s.parse().ok()) {
            intervals.push((seq, path));
        }
    }
    assert_eq!(
        finals.len(),
        1,
        "{program}: one final dump expected in {dir:?}"
    );
    intervals.sort();
    finals.extend(intervals.pop().map(|(_, p)| p));
    finals
}

/// Checks that our table equals jeprof's: every name, figures within 1e-4 relative.
fn same_table(what: &str, jeprof: &Text, ours: &Text) {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * a.abs().max(b.abs()).max(1.0);
    match (jeprof.total, ours.total) {
        (Some(a), Some(b)) => assert!(close(a, b), "{what}: Total {a} (jeprof) vs {b} (ours)"),
        (a, b) => assert_eq!(a, b, "{what}: Total"),
    }
    let theirs: Vec<&String> = jeprof.rows.keys().collect();
    let mine: Vec<&String> = ours.rows.keys().collect();
    assert_eq!(
        theirs, mine,
        "{what}: the names differ (jeprof's, then ours)"
    );
    for (name, &(flat, cum)) in &jeprof.rows {
        let (f, c) = ours.rows[name];
        assert!(
            close(flat, f) && close(cum, c),
            "{what}: {name}: jeprof flat {flat} cum {cum}, ours flat {f} cum {c}"
        );
    }
}

/// Runs `program` with `args` in a scratch directory (`{input}` in an argument stands for a file
/// of numbers there), and compares jeprof's table of each of its dumps with ours.
fn check(program: &str, args: &[&str]) {
    if !present(program) || !present(LIBJEMALLOC) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = numbers(dir.path());
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{input}", &input.display().to_string()))
        .collect();
    for dump in profile(program, &args, dir.path()) {
        let dump_arg = dump.display().to_string();
        let theirs = run(&["--text", "--show_bytes", program, &dump_arg]);
        assert_eq!(theirs.status, 0, "jeprof failed: {}", theirs.stderr);
        let ours = Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
            .args([
                "report",
                "--text",
                "--show_bytes",
                "--binary",
                program,
                &dump_arg,
            ])
            .output()
            .expect("run jeprof-compat");
        assert!(
            ours.status.success(),
            "jeprof-compat failed: {}",
            String::from_utf8_lossy(&ours.stderr)
        );
        let what = format!("{program} {}", dump.file_name().unwrap().to_string_lossy());
        let theirs = parse_text(&theirs.stdout).unwrap_or_else(|e| panic!("{what}: jeprof: {e}"));
        let ours = parse_text(&String::from_utf8_lossy(&ours.stdout))
            .unwrap_or_else(|e| panic!("{what}: ours: {e}"));
        assert!(!theirs.rows.is_empty(), "{what}: jeprof printed no rows");
        same_table(&what, &theirs, &ours);
    }
}

#[test]
fn python3_dump_is_named_and_counted_as_jeprof_does() {
    check(
        "/usr/bin/python3",
        &[
            "-c",
            "import json\n\
             rows = [{'k': i, 'v': str(i) * 3} for i in range(60000)]\n\
             text = json.dumps(rows)\n\
             keep = json.loads(text)\n\
             print(len(keep))",
        ],
    );
}

#[test]
fn perl_dump_is_named_and_counted_as_jeprof_does() {
    check(
        "/usr/bin/perl",
        &[
            "-e",
            "my %h; $h{$_} = [$_ x 3] for 1..60000; my @s = sort keys %h; print scalar(@s), qq(\\n)",
        ],
    );
}

#[test]
fn sqlite3_dump_is_named_and_counted_as_jeprof_does() {
    check(
        "/usr/bin/sqlite3",
        &[
            ":memory:",
            "create table t(a, b); \
             with recursive c(x) as (select 1 union all select x + 1 from c where x < 60000) \
             insert into t select x, hex(randomblob(20)) from c; \
             create index i on t(b); select count(*) from t;",
        ],
    );
}

#[test]
fn sort_dump_is_named_and_counted_as_jeprof_does() {
    check("/usr/bin/sort", &["{input}"]);
}

#[test]
fn jq_dump_is_named_and_counted_as_jeprof_does() {
    check(
        "/usr/bin/jq",
        &["-n", "[range(60000) | {a: ., b: tostring}] | length"],
    );
}

#[test]
fn awk_dump_is_named_and_counted_as_jeprof_does() {
    check(
        "/usr/bin/awk",
        &["{ a[$1] = $1 \"x\" } END { print length(a) }", "{input}"],
    );
}
