//! pprof output that reads as well as the text report, checked with `go tool pprof` itself: on a
//! real Rust dump (`rust_demo.heap`, with `# line` source positions) `-top` charges the program's
//! functions under whole, distinct names, `-top -lines` and `-list` show their files and lines,
//! `-traces` start at them; a raw dump given `--binary` gets DWARF lines and the program's build
//! id. The `go tool pprof` checks need `go` ([`jeprof_conformance::require_go`]: skipped with a
//! notice where it is missing, a failure under `CI=true`).

mod common;

use std::path::Path;

use jeprof_compat::pprof::{read_gz, PbProfile};

fn fixture(name: &str) -> String {
    common::fixtures().join(name).display().to_string()
}

/// Converts `dump` (with `extra` options) and returns the file and its decoded message.
fn convert(dir: &Path, dump: &str, extra: &[&str]) -> (String, PbProfile) {
    let out = dir.join("out.pb.gz").display().to_string();
    let mut args = vec!["pprof", "-o", &out];
    args.extend_from_slice(extra);
    args.push(dump);
    common::run_ok(&args);
    let pb = read_gz(&std::fs::read(&out).unwrap()).expect("decodes");
    (out, pb)
}

/// `go tool pprof ARGS FILE`'s standard output, pprof's scratch files in `dir`.
fn go_pprof(go: &Path, dir: &Path, args: &[&str], file: &str) -> String {
    let mut all = args.to_vec();
    all.push(file);
    jeprof_conformance::go_pprof(go, dir, &all)
}

/// The function names of `-top`'s rows with a flat figure other than 0.
fn charged(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter(|l| !l.trim_start().starts_with('0'))
        .filter_map(|l| l.split_whitespace().nth(5).map(str::to_string))
        .collect()
}

const SHIMS: [&str; 5] = [
    "__rust_alloc",
    "GlobalAlloc",
    "jeprof_shim",
    "alloc::alloc::alloc",
    "::alloc (inline)",
];

#[test]
fn go_pprof_top_charges_the_programs_functions_under_whole_names() {
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = convert(dir.path(), &fixture("rust_demo.heap"), &[]);
    let top = go_pprof(
        &go,
        dir.path(),
        &["-top", "-sample_index=inuse_space"],
        &file,
    );
    let flat = charged(&top);
    assert!(!flat.is_empty(), "{top}");
    for name in &flat {
        assert!(name.starts_with("demo::"), "flat on {name}:\n{top}");
    }
    for shim in SHIMS {
        assert!(!top.contains(shim), "{shim} in\n{top}");
    }
    // Names pprof would have cut down to one (`::call_once`) stay whole.
    assert!(
        top.contains("<&dyn core::ops::function::Fn<(), Output = i32>"),
        "{top}"
    );
    assert!(!top.contains(" ::call_once"), "{top}");
    // jeprof's charging, when asked for.
    let (file, _) = convert(dir.path(), &fixture("rust_demo.heap"), &["--hide", ""]);
    let top = go_pprof(
        &go,
        dir.path(),
        &["-top", "-sample_index=inuse_space"],
        &file,
    );
    assert!(
        charged(&top).iter().any(|n| !n.starts_with("demo::")),
        "{top}"
    );
}

#[test]
fn go_pprof_lines_and_list_show_source_files_and_lines() {
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = convert(dir.path(), &fixture("rust_demo.heap"), &[]);
    // The dump's `# line` lines put `vec![1u8; 4096]` of `page_buffers` at demo.rs:28.
    let lines = go_pprof(&go, dir.path(), &["-top", "-lines"], &file);
    assert!(
        lines
            .lines()
            .any(|l| l.contains("demo::page_buffers ") && l.ends_with("/shim/examples/demo.rs:28")),
        "{lines}"
    );
    let list = go_pprof(&go, dir.path(), &["-list", "demo::page_buffers"], &file);
    assert!(!list.contains("No source information"), "{list}");
    assert!(
        list.contains("ROUTINE ======================== demo::page_buffers in ")
            && list.contains("/shim/examples/demo.rs"),
        "{list}"
    );
}

#[test]
fn go_pprof_traces_start_at_the_programs_functions() {
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = convert(dir.path(), &fixture("rust_demo.heap"), &[]);
    let traces = go_pprof(
        &go,
        dir.path(),
        &["-traces", "-sample_index=inuse_space"],
        &file,
    );
    let leaves: Vec<&str> = traces
        .split("-----------+-------------------------------------------------------")
        .skip(1)
        .filter_map(|trace| trace.lines().find(|l| !l.trim().is_empty()))
        .map(|first| first.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert!(!leaves.is_empty(), "{traces}");
    for leaf in leaves {
        assert!(
            leaf.starts_with("demo::"),
            "a trace starts at {leaf}:\n{traces}"
        );
    }
    for shim in SHIMS {
        assert!(!traces.contains(shim), "{shim} in\n{traces}");
    }
}

#[test]
fn functions_are_distinct_and_mappings_claim_what_they_have() {
    let dir = tempfile::tempdir().unwrap();
    let (_, pb) = convert(dir.path(), &fixture("rust_demo.heap"), &[]);
    let s = |i: i64| pb.string_table[i as usize].as_str();
    let mut names: Vec<&str> = pb.function.iter().map(|f| s(f.name)).collect();
    let count = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), count, "two functions share a name");
    for f in &pb.function {
        // pprof re-"demangles" (and cuts down) a name whose system name is itself.
        assert_ne!(s(f.name), s(f.system_name), "{}", s(f.name));
    }
    let demo = pb
        .mapping
        .iter()
        .find(|m| s(m.filename).ends_with("/examples/demo"))
        .expect("the program's mapping");
    // Every location names its functions, so pprof does not symbolize them again; `_start` and
    // the C `main` have no source line, so lines are not claimed for the whole mapping.
    assert!(demo.has_functions);
    assert!(!demo.has_filenames && !demo.has_line_numbers);
    let page_buffers = pb
        .function
        .iter()
        .find(|f| s(f.name) == "demo::page_buffers")
        .expect("page_buffers");
    assert!(s(page_buffers.filename).ends_with("/shim/examples/demo.rs"));
}

#[test]
fn raw_dumps_get_dwarf_lines_and_the_programs_build_id_through_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (file, pb) = convert(
        dir.path(),
        &fixture("nonpie.heap"),
        &["--binary", &fixture("prog")],
    );
    let s = |i: i64| pb.string_table[i as usize].as_str();
    let prog = pb
        .mapping
        .iter()
        .find(|m| s(m.filename).ends_with("/prog"))
        .expect("the program's mapping");
    // `readelf -n fixtures/compat/prog`; read from --binary, which stands in for the mapping.
    assert_eq!(s(prog.build_id), "620d200ec3b024e816f94969fff4d0cb4afb3eb5");
    assert!(prog.has_functions && prog.has_filenames && prog.has_line_numbers);
    let leaf = pb
        .function
        .iter()
        .find(|f| s(f.name) == "leaf_alloc")
        .expect("leaf_alloc");
    assert!(s(leaf.filename).ends_with("prog.c"), "{}", s(leaf.filename));
    let leaf_lines: Vec<i64> = pb
        .location
        .iter()
        .flat_map(|l| &l.line)
        .filter(|l| l.function_id == leaf.id)
        .map(|l| l.line)
        .collect();
    assert_eq!(leaf_lines, [3], "prog.c line 3 holds leaf_alloc's malloc");
    if let Some(go) = jeprof_conformance::require_go() {
        let top = go_pprof(&go, dir.path(), &["-top", "-lines"], &file);
        assert!(
            top.contains("leaf_alloc ") && top.contains("prog.c:3"),
            "{top}"
        );
    }
}
