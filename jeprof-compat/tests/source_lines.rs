//! Source positions of frames: from a symbolized dump's `# line` lines (which the real jeprof must
//! ignore, its reports unchanged) and from a program's DWARF through `--binary`.

mod common;

use std::path::Path;

use jeprof_compat::{load, ReadPolicy, SymbolizeOptions};
use jeprof_dumpfmt::{SourceLine, WriteOptions};

/// `symbolized.heap` as our writer writes it, with a made-up position for every name when
/// `with_lines`, so the two files differ in their `# line` lines only.
fn rewrite_symbolized(with_lines: bool, out: &Path) {
    let mut profile =
        jeprof_dumpfmt::read::read_file(common::fixtures().join("symbolized.heap")).unwrap();
    let symbols = profile.symbols.as_mut().unwrap();
    symbols.lines.clear();
    if with_lines {
        for (address, names) in &symbols.names {
            let lines = (0..names.len())
                .map(|i| {
                    Some(SourceLine {
                        file: format!("src/dir with space/f{address:x}.rs"),
                        line: 10 + i as u32,
                    })
                })
                .collect();
            symbols.lines.insert(*address, lines);
        }
    }
    let options = WriteOptions {
        header_period: jeprof_dumpfmt::HeaderPeriod::Sampling,
        ..WriteOptions::default()
    };
    jeprof_dumpfmt::write::write_file(&profile, out, &options).unwrap();
}

#[test]
fn real_jeprof_reports_a_dump_with_source_lines_exactly_as_without() {
    let dir = tempfile::tempdir().unwrap();
    let (with, without) = (
        dir.path().join("with.heap"),
        dir.path().join("without.heap"),
    );
    rewrite_symbolized(true, &with);
    rewrite_symbolized(false, &without);
    let written = std::fs::read_to_string(&with).unwrap();
    assert!(written.contains("\n# line 0x"), "{written}");
    for flags in [
        &["--text", "--show_bytes"][..],
        &["--text", "--inuse_objects"],
        &["--collapsed"],
    ] {
        let run = |path: &Path| {
            let mut args = flags.to_vec();
            args.push(path.to_str().unwrap());
            let out = jeprof_conformance::run(&args);
            assert_eq!(out.status, 0, "jeprof {args:?}: {}", out.stderr);
            out
        };
        let (a, b) = (run(&with), run(&without));
        assert!(a.stdout.lines().count() > 3, "{}", a.stdout);
        let sorted = |s: &str| {
            let mut l: Vec<String> = s.lines().map(str::to_string).collect();
            l.sort();
            l
        };
        assert_eq!(sorted(&a.stdout), sorted(&b.stdout), "jeprof {flags:?}");
        assert!(!a.stderr.contains("Ignoring"), "{}", a.stderr);
    }
}

#[test]
fn resolved_frames_carry_the_symbol_sections_source_lines() {
    let dir = tempfile::tempdir().unwrap();
    let with = dir.path().join("with.heap");
    rewrite_symbolized(true, &with);
    let resolved = load(&with, &SymbolizeOptions::default(), &ReadPolicy::default()).unwrap();
    let mut checked = 0;
    for frame in resolved.stacks.iter().flat_map(|s| &s.frames) {
        if !frame.symbolized {
            assert!(frame.lines.is_empty());
            continue;
        }
        assert_eq!(frame.lines.len(), frame.names.len());
        // Each name keeps its own position (innermost first, as the names).
        let last = frame.names.len() - 1;
        let line = frame.line(0).unwrap();
        assert_eq!(line.line, 10);
        assert_eq!(line.file, format!("src/dir with space/f{:x}.rs", frame.key));
        assert_eq!(frame.line(last).unwrap().line, 10 + last as u32);
        checked += 1;
    }
    assert!(checked > 5, "{checked}");
}

#[test]
fn binary_dwarf_gives_each_frame_its_line_in_the_c_source() {
    let fixtures = common::fixtures();
    let options = SymbolizeOptions {
        binary: Some(fixtures.join("prog")),
        ..SymbolizeOptions::default()
    };
    let resolved = load(
        &fixtures.join("nonpie.heap"),
        &options,
        &ReadPolicy::default(),
    )
    .unwrap();
    let source = std::fs::read_to_string(fixtures.join("prog.c")).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for frame in resolved.stacks.iter().flat_map(|s| &s.frames) {
        let Some(line) = frame.line(0) else { continue };
        assert!(line.file.ends_with("prog.c"), "{line}");
        // The line DWARF names holds the function's call or allocation: in `main`, a call of one
        // of the functions; elsewhere, the function's own one-line body.
        let text = source.lines().nth(line.line as usize - 1).unwrap();
        let function = frame.function();
        let in_main_body = function == "main" && line.line > 7;
        assert!(
            text.contains(&format!("{function}(")) || in_main_body,
            "{function} at {line}: {text}"
        );
        seen.insert(function.to_string());
    }
    assert!(
        ["leaf_alloc", "mid_a", "main"]
            .iter()
            .all(|f| seen.contains(*f)),
        "{seen:?}"
    );
}
