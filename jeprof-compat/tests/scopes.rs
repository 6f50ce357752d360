//! `report --scope LABEL` and `report --by-scope` on a dump that carries per-scope figures: one
//! scope's report charges only what that scope holds, the per-scope table adds scopes up with their
//! intervals, and what cannot be answered (an unknown scope, allocated figures, a dump without
//! scopes) exits 2 with one line saying why.

mod common;

use jeprof_dumpfmt::{Counts, Estimate, Profile, ScopeStack, Stack, SymbolTable};

fn bytes(b: f64) -> Estimate {
    Estimate {
        objects: b / 100.0,
        bytes: b,
        objects_variance: b / 1e4,
        bytes_variance: 100.0 * b,
    }
}

/// Two allocation sites under `main`; scope q1 holds 7,000 bytes at `alloc_a`, q2 2,000 at
/// `alloc_a` and 4,000 at `alloc_b`; 1,000 bytes at `alloc_a` belong to no scope.
fn scoped_dump(dir: &std::path::Path) -> String {
    let mut p = Profile::new(512);
    let stack = |frames: Vec<u64>, inuse: f64| Stack {
        frames,
        counts: Counts {
            inuse: bytes(inuse),
            accum: bytes(2.0 * inuse),
        },
        threads: Vec::new(),
    };
    p.stacks = vec![
        stack(vec![0x1000, 0x2001], 10_000.0),
        stack(vec![0x3000, 0x2001], 4_000.0),
    ];
    p.scopes = vec![
        ScopeStack {
            scope: "q1".into(),
            frames: vec![0x1000, 0x2001],
            inuse: bytes(7_000.0),
        },
        ScopeStack {
            scope: "q2".into(),
            frames: vec![0x1000, 0x2001],
            inuse: bytes(2_000.0),
        },
        ScopeStack {
            scope: "q2".into(),
            frames: vec![0x3000, 0x2001],
            inuse: bytes(4_000.0),
        },
    ];
    let mut symbols = SymbolTable::default();
    symbols.names.insert(0x1000, vec!["alloc_a".into()]);
    symbols.names.insert(0x3000, vec!["alloc_b".into()]);
    symbols.names.insert(0x2000, vec!["main".into()]);
    p.symbols = Some(symbols);
    let path = dir.join("scoped.heap");
    jeprof_dumpfmt::write::write_file(&p, &path, &jeprof_dumpfmt::WriteOptions::default()).unwrap();
    path.display().to_string()
}

/// The flat figure of the row naming `function`.
fn flat(report: &str, function: &str) -> Option<f64> {
    report.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() == 6 && fields[5] == function).then(|| fields[0].parse().unwrap())
    })
}

fn fails(args: &[&str]) -> String {
    let out = common::run(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn a_scopes_report_charges_only_what_that_scope_holds() {
    let dir = tempfile::tempdir().unwrap();
    let dump = scoped_dump(dir.path());
    let q2 = common::run_ok(&["report", "--show_bytes", "--scope", "q2", &dump]);
    // The heap_v2 encoding keeps each figure within 0.1% + 1 byte.
    let near =
        |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() <= 1.0 + want * 1e-3);
    assert!(near(flat(&q2, "alloc_a"), 2_000.0), "{q2}");
    assert!(near(flat(&q2, "alloc_b"), 4_000.0), "{q2}");
    let q1 = common::run_ok(&["report", "--show_bytes", "--scope", "q1", &dump]);
    assert!(near(flat(&q1, "alloc_a"), 7_000.0), "{q1}");
    assert_eq!(flat(&q1, "alloc_b"), None, "{q1}");
    let folded = common::run_ok(&["report", "--collapsed", "--scope", "q1", &dump]);
    assert_eq!(folded.trim(), "main;alloc_a 7000", "{folded}");
}

#[test]
fn by_scope_lists_each_scopes_total_with_its_interval_largest_first() {
    let dir = tempfile::tempdir().unwrap();
    let dump = scoped_dump(dir.path());
    let table = common::run_ok(&["report", "--by-scope", &dump]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "Total in scopes: 13000 B", "{table}");
    assert!(
        lines[2].starts_with("          7000") && lines[2].ends_with("  q1"),
        "{table}"
    );
    assert!(
        lines[3].starts_with("          6000") && lines[3].ends_with("  q2"),
        "{table}"
    );
    // q2's variance is 100 · 6000 bytes²: ± 1.96 · 774.6 = 1518.2, truncated as jeprof prints.
    assert!(lines[3].contains("[4481, 7518]"), "{table}");
}

#[test]
fn what_the_scopes_cannot_answer_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let dump = scoped_dump(dir.path());
    let err = fails(&["report", "--scope", "q9", &dump]);
    assert!(err.contains("`q9`") && err.contains("q1, q2"), "{err}");
    let err = fails(&["report", "--by-scope", "--alloc_space", &dump]);
    assert!(err.contains("in-use memory only"), "{err}");
    let plain = common::fixtures().join("a.heap").display().to_string();
    let err = fails(&["report", "--by-scope", &plain]);
    assert!(err.contains("no per-scope figures"), "{err}");
}
