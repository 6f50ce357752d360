//! Flat on the program's own functions: on a real Rust dump (`rust_demo.heap`, the shim's demo)
//! the default report charges every byte to a `demo::` function, where jeprof charges it to
//! `alloc::raw_vec` and `alloc::boxed`; `--hide`, `--show_from` and `--cum` change that as their
//! help says; folded stacks lose the allocator frames the text report drops.

mod common;

fn fixture(name: &str) -> String {
    common::fixtures().join(name).display().to_string()
}

/// `(flat, cum, function)` of each row of a `--show_bytes` text report.
fn rows(text: &str) -> Vec<(u64, u64, String)> {
    text.lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = line.splitn(4, '%').nth(3).unwrap_or("").trim().to_string();
            (
                fields[0].parse().expect("flat"),
                fields[3].parse().expect("cum"),
                name,
            )
        })
        .collect()
}

fn report(extra: &[&str]) -> Vec<(u64, u64, String)> {
    let dump = fixture("rust_demo.heap");
    let mut args = vec!["report", "--show_bytes"];
    args.extend_from_slice(extra);
    args.push(&dump);
    rows(&common::run_ok(&args))
}

fn flat_of(rows: &[(u64, u64, String)], function: &str) -> u64 {
    rows.iter()
        .find(|r| r.2 == function)
        .unwrap_or_else(|| panic!("no row {function}: {rows:?}"))
        .0
}

#[test]
fn flat_goes_to_the_programs_functions_by_default_on_a_real_rust_dump() {
    let ours = report(&[]);
    let charged: Vec<&(u64, u64, String)> = ours.iter().filter(|r| r.0 > 0).collect();
    assert!(!charged.is_empty());
    for (_, _, name) in &charged {
        assert!(name.starts_with("demo::"), "flat on {name}: {ours:?}");
    }
    // Each call site holds what it allocated: its flat is its cum.
    for site in [
        "demo::many_small_boxes",
        "demo::page_buffers",
        "demo::one_big_buffer",
    ] {
        let row = ours.iter().find(|r| r.2 == site).expect(site);
        assert!(row.0 > 0 && row.0 == row.1, "{row:?}");
    }
    // The standard library functions passed over keep their cum.
    let from_elem = ours
        .iter()
        .find(|r| r.2 == "alloc::vec::from_elem (inline)")
        .expect("from_elem row");
    assert_eq!(from_elem.0, 0);
    // (Figures print truncated: the sum of two may be one more.)
    let sites = flat_of(&ours, "demo::page_buffers") + flat_of(&ours, "demo::one_big_buffer");
    assert!(from_elem.1.abs_diff(sites) <= 1, "{from_elem:?} {sites}");
    // jeprof's charging (as `--jeprof_names` gives it) puts none of it on the program.
    let jeprof = report(&["--hide", ""]);
    assert_eq!(flat_of(&jeprof, "demo::page_buffers"), 0);
    // (Inlined into its caller or not, by the build.)
    assert!(
        jeprof
            .iter()
            .any(|r| r.2.contains("RawVecInner") && r.2.contains("::try_allocate_in") && r.0 > 0),
        "{jeprof:?}"
    );
    // Moving flat changes no total.
    let sum = |rows: &[(u64, u64, String)]| rows.iter().map(|r| r.0).sum::<u64>();
    assert!(sum(&ours).abs_diff(sum(&jeprof)) <= ours.len() as u64);
}

#[test]
fn hide_replaces_the_default_list() {
    // Hiding the call sites too moves their flat to their caller.
    let rows = report(&["--hide", "alloc::|^demo::(many|page|one)"]);
    let main = rows.iter().find(|r| r.2 == "demo::main").expect("main row");
    assert_eq!(main.0, main.1, "{rows:?}");
    // `core::` and `std::` are no longer hidden, but no stack has them at its leaf.
    let charged: Vec<&String> = rows.iter().filter(|r| r.0 > 0).map(|r| &r.2).collect();
    assert_eq!(charged, ["demo::main"]);
}

#[test]
fn jeprof_names_keeps_jeprofs_charging() {
    let rows = report(&["--jeprof_names", "--keep_alloc_frames"]);
    assert!(flat_of(&rows, "::alloc (inline)") > 0, "{rows:?}");
    // `--hide` still works there when asked for.
    let rows = report(&["--jeprof_names", "--hide", "^::|^alloc::|^__rustc::"]);
    assert!(flat_of(&rows, "demo::page_buffers") > 0, "{rows:?}");
}

#[test]
fn cum_sorts_rows_by_cum_then_name() {
    let rows = report(&["--cum"]);
    assert!(rows.len() > 3);
    for pair in rows.windows(2) {
        assert!(
            pair[0].1 > pair[1].1 || (pair[0].1 == pair[1].1 && pair[0].2 < pair[1].2),
            "{pair:?}"
        );
    }
    // Without it, flat.
    let rows = report(&[]);
    assert!(rows.windows(2).all(|p| p[0].0 >= p[1].0));
    assert!(rows.windows(2).any(|p| p[0].1 < p[1].1));
}

#[test]
fn show_from_drops_the_frames_toward_the_root() {
    let rows = report(&["--show_from", "^demo::main$"]);
    assert!(
        rows.iter().all(|r| r.2.starts_with("demo::")
            || r.2.starts_with("alloc::")
            || r.2.starts_with("<")),
        "{rows:?}"
    );
    assert!(!rows
        .iter()
        .any(|r| r.2 == "main" || r.2.starts_with("std::rt::")));
    let folded = common::run_ok(&[
        "report",
        "--collapsed",
        "--show_from",
        "^demo::main$",
        &fixture("rust_demo.heap"),
    ]);
    assert!(!folded.is_empty());
    for line in folded.lines() {
        assert!(line.starts_with("demo::main;"), "{line}");
    }
}

#[test]
fn folded_stacks_drop_the_allocator_frames_the_text_report_drops() {
    let folded = common::run_ok(&["report", "--collapsed", &fixture("rust_demo.heap")]);
    for shim in [
        "__rust_alloc",
        "GlobalAlloc",
        "alloc::alloc::alloc",
        "jeprof_shim",
    ] {
        assert!(!folded.contains(shim), "{shim} in\n{folded}");
    }
    let leaves: Vec<&str> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.0.rsplit(';').next())
        .collect();
    assert!(
        leaves.contains(&"alloc::boxed::box_new_uninit[inline]"),
        "{leaves:?}"
    );
    // Kept when asked, as jeprof keeps them.
    let kept = common::run_ok(&[
        "report",
        "--collapsed",
        "--keep_alloc_frames",
        &fixture("rust_demo.heap"),
    ]);
    assert!(kept.contains("GlobalAlloc>::alloc[inline]"), "{kept}");
}

#[test]
fn diff_without_cum_lists_the_programs_functions() {
    let dump = fixture("rust_demo.heap");
    let text = common::run_ok(&["diff", "--show_bytes", &dump, &dump]);
    let functions: Vec<&str> = text
        .lines()
        .skip(3)
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert!(!functions.is_empty());
    for f in &functions {
        assert!(f.starts_with("demo::"), "{f} in\n{text}");
    }
}
