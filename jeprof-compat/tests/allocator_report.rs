//! `report --allocator`: the table, a blank line, then each figure the dumps carry as
//! `<name>: <bytes> B` in a fixed order, summed over several dumps, and the reading; a dump
//! without the figures is an error naming the file and the annotation.

mod common;

use std::path::Path;

use jeprof_dumpfmt::allocator::{AllocatorFigures, JemallocFigures};
use jeprof_dumpfmt::WriteOptions;

/// Writes a symbolized dump of two stacks carrying `figures` (none: an older dump) to `path`.
fn write_dump(path: &Path, figures: Option<&AllocatorFigures>, scale: f64) {
    let mut profile = common::generated_profile(
        &[
            (vec![1, 2], 10.0 * scale, 40_000.0 * scale),
            (vec![3, 2], 5.0 * scale, 9_000.0 * scale),
        ],
        512 << 10,
        0x40_0000,
    );
    profile.annotations = vec![("shim_live_samples".into(), "15".into())];
    if let Some(figures) = figures {
        profile.annotations.extend(figures.to_annotations());
    }
    jeprof_dumpfmt::write::write_file(&profile, path, &WriteOptions::default()).unwrap();
}

fn figures(base: u64) -> AllocatorFigures {
    AllocatorFigures {
        jemalloc: Some(JemallocFigures {
            allocated: base + 1,
            active: base + 2_000,
            resident: base + 30_000,
            mapped: base + 400_000,
            retained: 5_000_000 + base,
            metadata: 60_000 + base,
        }),
        profiler: 7_000 + base,
        rss_anon: Some(base + 80_000),
        rss_file: Some(9_000 + base),
    }
}

/// The `<name>: <value> B` lines after the table's blank line.
fn figure_lines(out: &str) -> Vec<(String, u64)> {
    let (_, after) = out
        .split_once("\n\n")
        .expect("a blank line after the table");
    after
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(": ")?;
            let value = rest.strip_suffix(" B")?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

const ORDER: [&str; 9] = [
    "allocated",
    "active",
    "resident",
    "mapped",
    "retained",
    "metadata",
    "profiler",
    "rss_anon",
    "rss_file",
];

#[test]
fn allocator_report_prints_the_table_then_every_figure_in_order_equal_to_its_annotation() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("app.heap");
    let want = figures(1 << 20);
    write_dump(&dump, Some(&want), 1.0);
    let dump = dump.to_str().unwrap();

    let table = common::run_ok(&["report", dump]);
    let out = common::run_ok(&["report", "--allocator", dump]);
    assert!(out.starts_with(&format!("{table}\n")), "{out}");
    let lines = figure_lines(&out);
    let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ORDER);
    let annotations = want.to_annotations();
    let annotation = |key: &str| -> u64 {
        annotations
            .iter()
            .find(|(k, _)| k == key)
            .unwrap()
            .1
            .parse()
            .unwrap()
    };
    let keys = [
        "allocator_allocated",
        "allocator_active",
        "allocator_resident",
        "allocator_mapped",
        "allocator_retained",
        "allocator_metadata",
        "profiler_bytes",
        "process_rss_anon",
        "process_rss_file",
    ];
    for ((name, value), key) in lines.iter().zip(keys) {
        assert_eq!(*value, annotation(key), "{name}");
    }
    // The reading follows the figures: coverage, fragmentation, resident, retained, share.
    let (_, block) = out.split_once("\n\n").unwrap();
    let reading: Vec<&str> = block.lines().skip(ORDER.len()).collect();
    assert!(reading[0].starts_with("The profile covers"), "{block}");
    assert!(reading[1].starts_with("Fragmentation"), "{block}");
    assert!(reading[2].starts_with("Resident beyond active"), "{block}");
    assert!(reading[3].starts_with("Retained but unused"), "{block}");
    assert!(reading[4].starts_with("The profiler's share"), "{block}");
}

#[test]
fn allocator_report_of_two_dumps_sums_each_figure_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.heap"), dir.path().join("b.heap"));
    let (fa, fb) = (figures(1 << 20), figures(3 << 20));
    write_dump(&a, Some(&fa), 1.0);
    write_dump(&b, Some(&fb), 2.0);
    let out = common::run_ok(&[
        "report",
        "--allocator",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let (_, block) = out.split_once("\n\n").unwrap();
    assert!(block.starts_with("figures summed over 2 dumps"), "{block}");
    let each = |f: &AllocatorFigures| {
        let mut v = f.jemalloc.unwrap().values().to_vec();
        v.extend([f.profiler, f.rss_anon.unwrap(), f.rss_file.unwrap()]);
        v
    };
    let want: Vec<u64> = each(&fa)
        .iter()
        .zip(each(&fb))
        .map(|(a, b)| a + b)
        .collect();
    let got: Vec<u64> = figure_lines(&out).iter().map(|(_, v)| *v).collect();
    assert_eq!(got, want);
}

#[test]
fn allocator_report_of_a_dump_without_figures_exits_2_naming_the_file_and_the_annotation() {
    let dir = tempfile::tempdir().unwrap();
    let (with, old) = (dir.path().join("new.heap"), dir.path().join("old.heap"));
    write_dump(&with, Some(&figures(1 << 20)), 1.0);
    write_dump(&old, None, 1.0);
    let out = common::run(&[
        "report",
        "--allocator",
        with.to_str().unwrap(),
        old.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing printed before the error");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("old.heap"), "{err}");
    assert!(err.contains("annotation `allocator` is missing"), "{err}");
    assert!(err.contains("jeprof-shim or libjeprof_preload.so"), "{err}");

    // A peak dump holds an earlier moment's heap and says so.
    let peak = dir.path().join("peak.heap");
    let mut profile = jeprof_dumpfmt::read::read_file(&old).unwrap();
    profile.annotations = vec![("shim_peak_live_bytes".into(), "49000".into())];
    jeprof_dumpfmt::write::write_file(&profile, &peak, &WriteOptions::default()).unwrap();
    let out = common::run(&["report", "--allocator", peak.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("peak.heap") && err.contains("this is a peak dump"),
        "{err}"
    );
}

#[test]
fn allocator_report_of_one_process_series_shows_the_latest_and_the_change_not_a_sum() {
    let dir = tempfile::tempdir().unwrap();
    // jemalloc's names, given in string order: seq 10 (the latest) before seq 2.
    let (early, late) = (
        dir.path().join("jeprof.779.2.i2.heap"),
        dir.path().join("jeprof.779.10.i10.heap"),
    );
    let (fa, fb) = (figures(1 << 20), figures(3 << 20));
    write_dump(&early, Some(&fa), 1.0);
    write_dump(&late, Some(&fb), 2.0);
    let (early, late) = (early.to_str().unwrap(), late.to_str().unwrap());
    let out = common::run_ok(&["report", "--allocator", late, early]);
    let alone = common::run_ok(&["report", "--allocator", late]);
    assert_eq!(
        figure_lines(&out),
        figure_lines(&alone),
        "the latest dump's figures"
    );
    let (table, block) = out.split_once("\n\n").unwrap();
    assert_eq!(format!("{table}\n"), common::run_ok(&["report", late]));
    assert!(
        block.starts_with(
            "2 dumps of 1 process given: the figures and the table are each process's last dump"
        ),
        "{block}"
    );
    // allocated grew by 2 MiB from the first dump to the last.
    assert!(
        block.contains("Change over the series (first dump to last, of the 1 process with several): allocated +2.0 MiB"),
        "{block}"
    );
}

/// Writes a dump of process `pid` at second `second` of a day with `figures` (none: an older dump).
fn write_process_dump(path: &Path, pid: u32, second: u32, figures: Option<&AllocatorFigures>) {
    write_dump(path, figures, 1.0);
    let mut profile = jeprof_dumpfmt::read::read_file(path).unwrap();
    profile.labels = vec![
        ("pid".into(), pid.to_string()),
        ("time".into(), format!("2026-12-06T10:00:{second:02}Z")),
    ];
    jeprof_dumpfmt::write::write_file(&profile, path, &WriteOptions::default()).unwrap();
}

#[test]
fn merge_carries_the_allocator_figures_each_process_latest_summed_and_says_which_step_lost_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (fa, fb_early, fb_late, fc) = (
        figures(1 << 20),
        figures(2 << 20),
        figures(5 << 20),
        figures(7 << 20),
    );
    write_process_dump(Path::new(&path("a.heap")), 11, 1, Some(&fa));
    // Process 22's later dump is given first: its time, not the argument order, makes it the latest.
    write_process_dump(Path::new(&path("b2.heap")), 22, 9, Some(&fb_late));
    write_process_dump(Path::new(&path("b1.heap")), 22, 3, Some(&fb_early));
    write_process_dump(Path::new(&path("c.heap")), 33, 2, Some(&fc));
    write_process_dump(Path::new(&path("old.heap")), 44, 2, None);
    let sum = |fs: &[&AllocatorFigures]| -> Vec<u64> {
        let mut total = *fs[0];
        fs[1..].iter().for_each(|f| total.add(f).unwrap());
        figure_lines(&format!(
            "\n\n{}",
            jeprof_dumpfmt::allocator::describe(&total, None, 1)
        ))
        .into_iter()
        .map(|(_, v)| v)
        .collect()
    };
    let values =
        |out: &str| -> Vec<u64> { figure_lines(out).into_iter().map(|(_, v)| v).collect() };

    common::run_ok(&[
        "merge",
        "-o",
        &path("ab.heap"),
        &path("a.heap"),
        &path("b2.heap"),
        &path("b1.heap"),
    ]);
    let out = common::run_ok(&["report", "--allocator", &path("ab.heap")]);
    let (_, block) = out.split_once("\n\n").unwrap();
    assert!(block.starts_with("figures summed over 2 dumps"), "{block}");
    assert_eq!(
        values(&out),
        sum(&[&fa, &fb_late]),
        "a + b's latest, not b's two moments"
    );

    // A merge of merges is the merge of everything, and counts every process.
    common::run_ok(&[
        "merge",
        "-o",
        &path("abc.heap"),
        &path("ab.heap"),
        &path("c.heap"),
    ]);
    let out = common::run_ok(&["report", "--allocator", &path("abc.heap")]);
    let (_, block) = out.split_once("\n\n").unwrap();
    assert!(block.starts_with("figures summed over 3 dumps"), "{block}");
    assert_eq!(values(&out), sum(&[&fa, &fb_late, &fc]));

    // An input without figures: the merged dump says that the merge lost them, and why.
    common::run_ok(&[
        "merge",
        "-o",
        &path("lost.heap"),
        &path("a.heap"),
        &path("old.heap"),
    ]);
    let out = common::run(&["report", "--allocator", &path("lost.heap")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("lost.heap")
            && err.contains("merge: 1 of the 2 dumps merged carried no allocator figures"),
        "{err}"
    );
    assert!(!err.contains("take the dump with"), "{err}");
    // ... and a merge of that merge still says so.
    common::run_ok(&[
        "merge",
        "-o",
        &path("lost2.heap"),
        &path("lost.heap"),
        &path("c.heap"),
    ]);
    let out = common::run(&["report", "--allocator", &path("lost2.heap")]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("one of them said: merge: 1 of the 2"), "{err}");
}
