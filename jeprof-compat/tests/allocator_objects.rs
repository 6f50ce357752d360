//! Allocator frames known by where they live (issue 37 item 2, `jeprof_dumpfmt::charge` rule 1):
//! dumps like those of a stripped program under Debian's `libjemalloc.so.2`, whose leaf frames are
//! addresses inside the `libjemalloc.so.2` mapping that nothing names (or that jeprof names
//! `malloc_usable_size`, the nearest export), are charged to the program's function above them
//! by every view of the project's own (the default report, `--collapsed`, `leaks`, pprof,
//! export, the page), while jeprof-compatible output (`--jeprof_names --keep_alloc_frames`) keeps
//! jeprof's name rule and charges the jemalloc address, as jeprof does.
//!
//! The series is made here: 12 dumps an hour apart, with a symbol section naming only the
//! program's addresses and a memory map with the program and jemalloc.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jeprof_compat::export::{rows::rows, RowOptions};
use jeprof_compat::pprof::{build_with, PbProfile, PprofOptions};
use jeprof_compat::symbolize::SymbolizeOptions;
use jeprof_dumpfmt::charge::{Attribution, SkipRules};
use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack, SymbolTable};

const PROGRAM: u64 = 0x5555_5540_0000;
const JEMALLOC: u64 = 0x7f3c_8a21_0000;

const MAPS: &str = "555555400000-555555500000 r-xp 00000000 fe:00 11 /usr/bin/python3.11\n\
                    7f3c8a200000-7f3c8a210000 r--p 00000000 fe:00 12 \
                    /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n\
                    7f3c8a210000-7f3c8a290000 r-xp 00010000 fe:00 12 \
                    /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n";

/// Hour `hour` of the series: `PyList_Append` grows 2,000 KiB an hour, `PyDict_New` holds
/// 2.5 MB, each under two unnamed jemalloc frames (the second stack's leaf named as jeprof names
/// it, `malloc_usable_size`), then `main`.
fn dump(hour: u64) -> Profile {
    let period = 524_288u64;
    let mut p = Profile::new(period);
    let estimate = |objects: f64, size: f64| {
        let (objects_variance, bytes_variance) =
            jeprof_dumpfmt::math::variance_from_average(objects, objects * size, period as f64);
        Estimate {
            objects,
            bytes: objects * size,
            objects_variance,
            bytes_variance,
        }
    };
    let leak = estimate(2000.0 * (hour + 1) as f64, 1024.0);
    let steady = estimate(5000.0, 512.0);
    for (frames, e) in [
        (
            [
                JEMALLOC + 0x1230,
                JEMALLOC + 0x4561,
                PROGRAM + 0x1001,
                PROGRAM + 0x9001,
            ],
            leak,
        ),
        (
            [
                JEMALLOC + 0x7890,
                JEMALLOC + 0x4561,
                PROGRAM + 0x2001,
                PROGRAM + 0x9001,
            ],
            steady,
        ),
    ] {
        p.stacks.push(Stack {
            frames: frames.to_vec(),
            counts: Counts { inuse: e, accum: e },
            threads: Vec::new(),
        });
    }
    let mut names = BTreeMap::new();
    names.insert(PROGRAM + 0x1000, vec!["PyList_Append".to_string()]);
    names.insert(PROGRAM + 0x2000, vec!["PyDict_New".to_string()]);
    names.insert(PROGRAM + 0x9000, vec!["main".to_string()]);
    names.insert(JEMALLOC + 0x7890, vec!["malloc_usable_size".to_string()]);
    p.symbols = Some(SymbolTable {
        names,
        ..SymbolTable::default()
    });
    p.mapped_libraries = Some(MAPS.to_string());
    let moment =
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_507_200 + 3600 * hour);
    p.labels = vec![
        ("pid".into(), "4242".into()),
        ("time".into(), jeprof_dumpfmt::labels::rfc3339_utc(moment)),
    ];
    p
}

fn series(dir: &Path) -> Vec<PathBuf> {
    (0..12)
        .map(|hour| {
            let path = dir.join(format!("jeprof.4242.{hour}.i{hour}.heap"));
            jeprof_dumpfmt::write::write_file(&dump(hour), &path, &Default::default()).unwrap();
            path
        })
        .collect()
}

fn run_ok(args: &[&str], dumps: &[PathBuf]) -> String {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(dumps.iter().map(|d| d.display().to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    common::run_ok(&refs)
}

/// The function names of a `--text` report's rows with a flat figure other than 0.
fn flat_rows(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter(|l| l.split_whitespace().next().is_some_and(|f| f != "0"))
        .filter_map(|l| l.split_whitespace().nth(5).map(str::to_string))
        .collect()
}

#[test]
fn the_default_report_charges_the_caller_of_unnamed_jemalloc_frames_and_jeprofs_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let last = series(dir.path()).pop().unwrap();
    let ours = run_ok(
        &["report", "--text", "--show_bytes"],
        std::slice::from_ref(&last),
    );
    assert_eq!(flat_rows(&ours), ["PyList_Append", "PyDict_New"], "{ours}");
    assert!(
        !ours.contains("0x00007f3c") && !ours.contains("malloc_usable_size"),
        "{ours}"
    );
    // jeprof's rule, by name only: the flat figure stays on jemalloc's frames, as jeprof prints.
    let jeprofs = run_ok(
        &[
            "report",
            "--text",
            "--show_bytes",
            "--jeprof_names",
            "--keep_alloc_frames",
        ],
        &[last],
    );
    assert_eq!(
        flat_rows(&jeprofs),
        ["0x00007f3c8a211230", "malloc_usable_size"],
        "{jeprofs}"
    );
}

#[test]
fn folded_stacks_leave_out_the_jemalloc_frames() {
    let dir = tempfile::tempdir().unwrap();
    let last = series(dir.path()).pop().unwrap();
    let folded = run_ok(&["report", "--collapsed"], &[last]);
    let stacks: Vec<&str> = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect();
    assert_eq!(
        stacks,
        ["main;PyDict_New", "main;PyList_Append"],
        "{folded}"
    );
}

#[test]
fn leaks_over_the_series_finds_the_programs_function_not_a_jemalloc_address() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = series(dir.path());
    let table = run_ok(&["leaks"], &dumps);
    let first = table.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Leak suspects: 1 of 2 functions"),
        "{table}"
    );
    assert!(
        table.lines().last().unwrap().ends_with("  PyList_Append"),
        "{table}"
    );
    let per_stack = run_ok(&["leaks", "--per-stack"], &dumps);
    assert!(
        per_stack
            .lines()
            .last()
            .unwrap()
            .ends_with("  main;PyList_Append"),
        "{per_stack}"
    );
}

/// The distinct functions of the samples' first locations (where pprof puts flat).
fn pprof_flat(pb: &PbProfile) -> Vec<String> {
    let name_of = |location: u64| {
        let l = pb.location.iter().find(|l| l.id == location).unwrap();
        let f = pb
            .function
            .iter()
            .find(|f| f.id == l.line[0].function_id)
            .unwrap();
        pb.string_table[f.name as usize].clone()
    };
    let mut flat: Vec<String> = pb
        .sample
        .iter()
        .map(|s| name_of(s.location_id[0]))
        .collect();
    flat.sort();
    flat.dedup();
    flat
}

#[test]
fn pprof_export_and_the_page_charge_the_program_too() {
    let dir = tempfile::tempdir().unwrap();
    let last = series(dir.path()).pop().unwrap();
    let bytes = std::fs::read(&last).unwrap();
    let resolved = jeprof_compat::load_bytes(&bytes, "last", &SymbolizeOptions::default()).unwrap();
    let options = PprofOptions {
        skip: SkipRules::default(),
        attribution: Attribution::user_code(),
        ..PprofOptions::default()
    };
    let pb = build_with(std::slice::from_ref(&resolved), &options);
    assert_eq!(pprof_flat(&pb), ["PyDict_New", "PyList_Append"]);

    let row_options = RowOptions {
        skip: SkipRules::default(),
        per_thread: false,
    };
    let mut users: Vec<String> = rows(&resolved, &[], &row_options)
        .into_iter()
        .map(|r| r.user_frame.unwrap().to_string())
        .collect();
    // The writer may split a stack into several entries: one row each.
    users.sort();
    users.dedup();
    assert_eq!(users, ["PyDict_New", "PyList_Append"]);

    // The page the shim serves, from the same profile as read.
    let profile = jeprof_dumpfmt::read::parse(&bytes[..]).unwrap();
    let charged = jeprof_page::charge(&profile);
    let sites: Vec<(&str, bool)> = charged
        .sites
        .iter()
        .map(|s| (s.name.as_str(), s.bytes > 0.0))
        .collect();
    assert_eq!(
        sites,
        [
            ("PyList_Append", true),
            ("PyDict_New", true),
            ("main", false)
        ]
    );
}
