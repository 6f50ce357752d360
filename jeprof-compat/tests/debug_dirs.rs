//! Offline symbolization by build id: `symbolize --debug-dir` (and the same flag on the reports)
//! names a raw dump's frames from a debug file split off its program (`objcopy
//! --only-keep-debug`, placed as `DIR/.build-id/ab/cdef….debug`), whether the build id comes from
//! the dump (jeprof-shim's `# build_id:` lines), from the mapped file, or from a stripped
//! `--binary`; the names are the ones the unstripped program gives, and the real jeprof reads the
//! output. Build ids without a debug file are named in a warning; bad arguments exit 2.
//!
//! The program is `fixtures/compat/prog_pie` (built with a GNU build id) and the dump
//! `fixtures/compat/pie.heap`, a raw dump of it; `objcopy` and `strip` are binutils'.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use jeprof_compat::pprof::read_gz;

/// `prog_pie`'s build id (`file prog_pie`).
const BUILD_ID: &str = "4ecc4f0b6b10aac5b1825440def8e562e2d3c562";

/// A scratch directory with `debug/.build-id/4e/cc….debug` (prog_pie's debug file),
/// `app/prog_pie` (prog_pie with every symbol and all debug information stripped), and dumps.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let program = common::fixtures().join("prog_pie");
        let debug = dir.path().join(format!(
            "debug/.build-id/{}/{}.debug",
            &BUILD_ID[..2],
            &BUILD_ID[2..]
        ));
        std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
        binutils(
            "objcopy",
            &["--only-keep-debug", path(&program), path(&debug)],
        );
        let stripped = dir.path().join("app/prog_pie");
        std::fs::create_dir_all(stripped.parent().unwrap()).unwrap();
        binutils(
            "strip",
            &["--strip-all", "-o", path(&stripped), path(&program)],
        );
        Scratch { dir }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn debug_dir(&self) -> String {
        self.join("debug").display().to_string()
    }

    fn stripped(&self) -> String {
        self.join("app/prog_pie").display().to_string()
    }

    /// `pie.heap` with `edit` applied, written as `name`.
    fn dump(&self, name: &str, edit: impl Fn(&str) -> String) -> String {
        let text = std::fs::read_to_string(common::fixtures().join("pie.heap")).unwrap();
        let file = self.join(name);
        std::fs::write(&file, edit(&text)).unwrap();
        file.display().to_string()
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn binutils(tool: &str, args: &[&str]) {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool} runs (binutils): {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `# build_id:` line (as jeprof-shim writes them) before the first stack.
fn with_build_id(text: &str, id: &str, mapped: &str) -> String {
    let first_stack = text.find("\n@ ").unwrap() + 1;
    format!(
        "{}# build_id: {id} {mapped}\n{}",
        &text[..first_stack],
        &text[first_stack..]
    )
}

/// What the unstripped program names: the report of `pie.heap` with `--binary prog_pie`.
fn unstripped_report(extra: &[&str]) -> String {
    let program = common::fixtures().join("prog_pie");
    let dump = common::fixtures().join("pie.heap");
    let mut args = vec!["report", "--show_bytes", "--binary", path(&program)];
    args.extend_from_slice(extra);
    args.push(path(&dump));
    common::run_ok(&args)
}

/// `symbolize` with `args` (the dump last) into `out`, returning its stderr.
fn symbolize(out: &str, args: &[&str]) -> String {
    let mut all = vec!["symbolize", "-o", out];
    all.extend_from_slice(args);
    let run = common::run(&all);
    assert!(
        run.status.success(),
        "symbolize {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stderr).unwrap()
}

#[test]
fn symbolize_by_the_mapped_files_build_id_names_frames_as_the_unstripped_program() {
    let s = Scratch::new();
    // A raw jemalloc dump: no build ids in it; the stripped program is where its map says.
    let dump = s.dump("mapped.heap", |t| {
        t.replace("/opt/app/prog_pie", &s.stripped())
    });
    let out = s.join("mapped.sym.heap").display().to_string();
    let stderr = symbolize(&out, &["--debug-dir", &s.debug_dir(), &dump]);
    assert_eq!(stderr, "", "every mapping with frames has its debug file");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("--- symbol\n"), "{text}");
    assert_eq!(
        common::run_ok(&["report", "--show_bytes", &out]),
        unstripped_report(&[])
    );
    // The DWARF line program came along: `--lines` from the symbol section's `# line` entries.
    assert_eq!(
        common::run_ok(&["report", "--show_bytes", "--lines", &out]),
        unstripped_report(&["--lines"])
    );
    // Without the debug file the stripped program names nothing.
    let bare = common::run_ok(&["report", "--show_bytes", "--binary", &s.stripped(), &dump]);
    assert!(!bare.contains("leaf_alloc"), "{bare}");
}

#[test]
fn the_real_jeprof_reads_the_symbolized_dump_with_the_programs_figures() {
    let s = Scratch::new();
    let dump = s.dump("jeprof.heap", |t| {
        with_build_id(t, BUILD_ID, "/opt/app/prog_pie")
    });
    let out = s.join("jeprof.sym.heap").display().to_string();
    symbolize(&out, &["--debug-dir", &s.debug_dir(), &dump]);
    let jeprof = jeprof_conformance::run(&["--text", "--show_bytes", &out]);
    assert_eq!(jeprof.status, 0, "{}", jeprof.stderr);
    let got = jeprof_conformance::parse_text(&jeprof.stdout).unwrap();
    // jeprof's own report of the raw dump with the unstripped program (the golden).
    let golden =
        std::fs::read_to_string(common::fixtures().join("expected/pie.show_bytes.txt")).unwrap();
    let want = jeprof_conformance::parse_text(&golden).unwrap();
    assert_eq!(
        got.rows.keys().collect::<Vec<_>>(),
        want.rows.keys().collect::<Vec<_>>(),
        "{}",
        jeprof.stdout
    );
    assert!(want.rows.contains_key("leaf_alloc") && want.rows.contains_key("mid_b"));
    // The writer re-encodes the figures: jeprof computes them again within its rounding.
    let close = |a: f64, b: f64| (a - b).abs() <= 1.0 + 1e-3 * b.abs();
    for (name, &(flat, cum)) in &want.rows {
        let (f, c) = got.rows[name];
        assert!(
            close(f, flat) && close(c, cum),
            "{name}: {f} {c} vs {flat} {cum}"
        );
    }
    assert!(close(got.total.unwrap(), want.total.unwrap()));
}

#[test]
fn a_stripped_binary_or_the_dumps_own_build_id_finds_the_debug_file() {
    let s = Scratch::new();
    let dump = common::fixtures().join("pie.heap").display().to_string();
    // jeprof's form, the stripped program first: its build id finds the debug file.
    let out = s.join("binary.sym.heap").display().to_string();
    symbolize(&out, &["--debug-dir", &s.debug_dir(), &s.stripped(), &dump]);
    assert_eq!(
        common::run_ok(&["report", "--show_bytes", &out]),
        unstripped_report(&[])
    );
    // The dump's own build id, no program anywhere (/opt/app/prog_pie is not on this machine).
    let shim_like = s.dump("shim.heap", |t| {
        with_build_id(t, BUILD_ID, "/opt/app/prog_pie")
    });
    let out = s.join("shim.sym.heap").display().to_string();
    symbolize(&out, &["--debug-dir", &s.debug_dir(), &shim_like]);
    assert_eq!(
        common::run_ok(&["report", "--show_bytes", &out]),
        unstripped_report(&[])
    );
    // report and pprof take the flag too.
    assert_eq!(
        common::run_ok(&[
            "report",
            "--show_bytes",
            "--debug-dir",
            &s.debug_dir(),
            &shim_like
        ]),
        unstripped_report(&[])
    );
    let pb_file = s.join("shim.pb.gz").display().to_string();
    common::run_ok(&[
        "pprof",
        "-o",
        &pb_file,
        "--debug-dir",
        &s.debug_dir(),
        &shim_like,
    ]);
    let pb = read_gz(&std::fs::read(&pb_file).unwrap()).unwrap();
    let strings = &pb.string_table;
    let names: Vec<&str> = pb
        .function
        .iter()
        .map(|f| strings[f.name as usize].as_str())
        .collect();
    for f in ["leaf_alloc", "mid_a", "mid_b", "recurse", "main"] {
        assert!(names.contains(&f), "{f} not in {names:?}");
    }
    let ids: Vec<&str> = pb
        .mapping
        .iter()
        .map(|m| strings[m.build_id as usize].as_str())
        .collect();
    assert!(ids.contains(&BUILD_ID), "{ids:?}");
}

#[test]
fn a_build_id_without_a_debug_file_is_named_and_its_frames_stay_addresses() {
    let s = Scratch::new();
    let missing = "00112233445566778899aabbccddeeff00112233";
    let dump = s.dump("missing.heap", |t| {
        with_build_id(t, missing, "/opt/app/prog_pie")
    });
    let out = s.join("missing.sym.heap").display().to_string();
    let stderr = symbolize(&out, &["--debug-dir", &s.debug_dir(), &dump]);
    assert_eq!(
        stderr.lines().count(),
        1,
        "one warning for the one mapping: {stderr}"
    );
    assert!(
        stderr.contains(&format!("/opt/app/prog_pie (build id {missing})"))
            && stderr.contains(".build-id/00/112233445566778899aabbccddeeff00112233.debug")
            && stderr.contains(&s.debug_dir()),
        "{stderr}"
    );
    let report = common::run_ok(&["report", "--show_bytes", &out]);
    assert!(report.contains("0x0000555555555142"), "{report}");
    assert!(!report.contains("leaf_alloc"), "{report}");
}

#[test]
fn bad_symbolize_arguments_exit_2_saying_what_is_wrong() {
    let s = Scratch::new();
    let dump = common::fixtures().join("pie.heap").display().to_string();
    let out = s.join("bad.sym.heap").display().to_string();
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec![
                "symbolize",
                "-o",
                &out,
                "--debug-dir",
                "/no/such/dir",
                &dump,
            ],
            "--debug-dir /no/such/dir: ",
        ),
        (
            vec!["symbolize", "-o", &out, &dump, &dump],
            "symbolize takes one dump, 2 given",
        ),
        (
            vec!["symbolize", "-o", &out, "--jeprof_names", &dump],
            "symbolize writes every name whole",
        ),
        (vec!["symbolize", &dump], "--output"),
    ];
    for (args, message) in cases {
        let run = common::run(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    assert!(!Path::new(&out).exists(), "nothing written on an error");
    let report = common::run(&["report", "--debug-dir", &dump, &dump]);
    assert_eq!(report.status.code(), Some(2));
}

#[test]
fn a_binary_of_another_build_than_the_dump_records_exits_2() {
    let s = Scratch::new();
    let other = "00112233445566778899aabbccddeeff00112233";
    let dump = s.dump("other.heap", |t| {
        with_build_id(t, other, "/opt/app/prog_pie")
    });
    let program = common::fixtures().join("prog_pie");
    let run = common::run(&["report", "--binary", path(&program), &dump]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "its build id {BUILD_ID} is not the one {dump} records for /opt/app/prog_pie ({other})"
        )),
        "{stderr}"
    );
    // The same program for a dump recording its own build id is taken.
    let same = s.dump("same.heap", |t| {
        with_build_id(t, BUILD_ID, "/opt/app/prog_pie")
    });
    assert_eq!(
        common::run_ok(&["report", "--show_bytes", "--binary", path(&program), &same]),
        unstripped_report(&[])
    );
}
