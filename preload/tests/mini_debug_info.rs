//! A stripped program that carries MiniDebugInfo (`.gnu_debugdata`, the xz-compressed function
//! symbols Fedora's and others' packages keep), preloaded: the dump's symbol section names its
//! static functions, which its `.dynsym` does not have; the same program stripped without it
//! leaves them unnamed. The MiniDebugInfo is made as Fedora's `find-debuginfo` makes it (nm,
//! objcopy, strip, xz from binutils and xz-utils). x86_64 only: the aarch64 step would need the
//! cross binutils to make it.
#![cfg(target_arch = "x86_64")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{preloaded, read_dump, run_ok};

/// Runs a build tool, failing the test with its output unless it succeeds.
fn tool(program: &str, args: &[&str], dir: &Path) -> Vec<u8> {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (binutils, xz-utils): {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Defined symbols' names from `nm --format=posix` output, keeping those whose type `keep` takes.
fn names(listing: &[u8], keep: impl Fn(&str) -> bool) -> Vec<String> {
    String::from_utf8_lossy(listing)
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let (name, kind) = (fields.next()?, fields.next()?);
            keep(kind).then(|| name.to_string())
        })
        .collect()
}

/// Builds `minidebug.c`, then two stripped copies: `stripped`, and `with_mini`, which carries
/// MiniDebugInfo made as `find-debuginfo` makes it (the function symbols not in `.dynsym`).
fn programs(dir: &Path) -> (PathBuf, PathBuf) {
    let cc = jeprof_conformance::target_c_compiler();
    common::compile(
        &cc,
        &[common::program_source("minidebug.c")],
        &["-O1", "-g0"],
        &dir.join("full"),
    );
    let dynamic = names(
        &tool(
            "nm",
            &["-D", "full", "--format=posix", "--defined-only"],
            dir,
        ),
        |_| true,
    );
    let functions = names(
        &tool("nm", &["full", "--format=posix", "--defined-only"], dir),
        |kind| matches!(kind, "T" | "t"),
    );
    let keep: Vec<String> = functions
        .into_iter()
        .filter(|f| !dynamic.contains(f))
        .collect();
    assert!(keep.iter().any(|f| f == "hidden_site"), "{keep:?}");
    std::fs::write(dir.join("keep_symbols"), keep.join("\n") + "\n").unwrap();
    tool("objcopy", &["--only-keep-debug", "full", "debug"], dir);
    tool(
        "objcopy",
        &[
            "-S",
            "--remove-section",
            ".gdb_index",
            "--remove-section",
            ".comment",
            "--keep-symbols=keep_symbols",
            "debug",
            "mini",
        ],
        dir,
    );
    let compressed = tool("xz", &["--stdout", "mini"], dir);
    std::fs::write(dir.join("mini.xz"), compressed).unwrap();
    std::fs::copy(dir.join("full"), dir.join("stripped")).unwrap();
    tool("strip", &["--strip-all", "-R", ".comment", "stripped"], dir);
    std::fs::copy(dir.join("stripped"), dir.join("with_mini")).unwrap();
    tool(
        "objcopy",
        &["--add-section", ".gnu_debugdata=mini.xz", "with_mini"],
        dir,
    );
    (dir.join("stripped"), dir.join("with_mini"))
}

/// Every name the dump of `program`, run preloaded, gives any frame.
fn dumped_names(program: &Path, dir: &Path) -> Vec<String> {
    let dump = dir.join(format!(
        "{}.heap",
        program.file_name().unwrap().to_string_lossy()
    ));
    let settings = format!("sample_rate:65536,dump_on_exit:{}", dump.display());
    run_ok(preloaded(common::program(program), &settings));
    let profile = read_dump(&dump);
    let symbols = profile.symbols.expect("the dump is symbolized");
    symbols.names.into_values().flatten().collect()
}

#[test]
fn a_stripped_programs_minidebuginfo_names_its_static_functions_in_the_dump() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, with_mini) = programs(dir.path());
    let without = dumped_names(&stripped, dir.path());
    assert!(
        !without.iter().any(|n| n == "hidden_site"),
        "a stripped program without MiniDebugInfo cannot name its static function: {without:?}"
    );
    let with = dumped_names(&with_mini, dir.path());
    assert!(
        with.iter().any(|n| n == "hidden_site"),
        "the MiniDebugInfo names hidden_site: {with:?}"
    );
    assert!(with.iter().any(|n| n == "main"), "{with:?}");
}
