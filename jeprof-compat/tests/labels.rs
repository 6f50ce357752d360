//! Labels in dumps (`# label` lines): the real jeprof reports a dump with them byte for byte as
//! the same dump without them; they, and `--label`s, become string labels on every pprof sample
//! (`pprof`, `merge --format pprof`), which `go tool pprof -tags` shows.

mod common;

use std::path::Path;

use jeprof_dumpfmt::WriteOptions;

/// `symbolized.heap` as our writer writes it, with labels when `with_labels`, so the two files
/// differ in their `# label` lines only.
fn rewrite_symbolized(with_labels: bool, out: &Path) {
    let mut profile =
        jeprof_dumpfmt::read::read_file(common::fixtures().join("symbolized.heap")).unwrap();
    profile.labels.clear();
    if with_labels {
        for (k, v) in [
            ("program", "kv-store"),
            ("build_id", "0123456789abcdef0123456789abcdef01234567"),
            ("hostname", "host-1.example"),
            ("pid", "4242"),
            ("time", "2026-11-24T08:30:00Z"),
            // What jeprof could mistake for its own lines, were it to read comments.
            (
                "tricky",
                " @ 0x401234 t*: 1: 2 [3: 4] --- heap heap_v2/1 binary=x ",
            ),
        ] {
            profile.labels.push((k.to_string(), v.to_string()));
        }
    }
    let options = WriteOptions {
        header_period: jeprof_dumpfmt::HeaderPeriod::Sampling,
        ..WriteOptions::default()
    };
    jeprof_dumpfmt::write::write_file(&profile, out, &options).unwrap();
}

#[test]
fn real_jeprof_reports_a_dump_with_labels_byte_for_byte_as_without() {
    // One name in two directories of the same length, so that even jeprof's messages naming
    // the file are the same.
    let dir = tempfile::tempdir().unwrap();
    let (with, without) = (
        dir.path().join("a/dump.heap"),
        dir.path().join("b/dump.heap"),
    );
    std::fs::create_dir_all(with.parent().unwrap()).unwrap();
    std::fs::create_dir_all(without.parent().unwrap()).unwrap();
    rewrite_symbolized(true, &with);
    rewrite_symbolized(false, &without);
    let written = std::fs::read_to_string(&with).unwrap();
    assert_eq!(written.matches("\n# label ").count(), 6, "{written}");
    // `--collapsed` prints in Perl's hash order, which differs between two runs on one
    // file: those are compared as sets of lines.
    for (flags, ordered) in [
        (&["--text", "--show_bytes"][..], true),
        (&["--text", "--inuse_objects"], true),
        (&["--text", "--alloc_space"], true),
        (&["--collapsed"], false),
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
        if ordered {
            assert_eq!(a.stdout, b.stdout, "jeprof {flags:?}");
        } else {
            let sorted = |s: &str| {
                let mut l: Vec<&str> = s.lines().collect();
                l.sort_unstable();
                l.join("\n")
            };
            assert_eq!(sorted(&a.stdout), sorted(&b.stdout), "jeprof {flags:?}");
        }
        let unnamed = |s: &str| {
            s.replace("/a/dump.heap", "/dump.heap")
                .replace("/b/dump.heap", "/dump.heap")
        };
        assert_eq!(unnamed(&a.stderr), unnamed(&b.stderr), "jeprof {flags:?}");
    }
}

/// `symbolized.heap` with labels `program` and `region`, written to `out`.
fn labelled_dump(out: &Path) {
    let mut profile =
        jeprof_dumpfmt::read::read_file(common::fixtures().join("symbolized.heap")).unwrap();
    profile.labels = vec![
        ("program".into(), "kv-store".into()),
        ("region".into(), "eu-west-1".into()),
    ];
    jeprof_dumpfmt::write::write_file(&profile, out, &WriteOptions::default()).unwrap();
}

/// Every sample's string labels, as `key=value`.
fn sample_labels(pb: &Path) -> Vec<Vec<String>> {
    let profile = jeprof_compat::pprof::read_gz(&std::fs::read(pb).unwrap()).unwrap();
    let s = |i: i64| profile.string_table[i as usize].clone();
    profile
        .sample
        .iter()
        .map(|sample| {
            sample
                .label
                .iter()
                .map(|l| format!("{}={}", s(l.key), s(l.str)))
                .collect()
        })
        .collect()
}

/// `go tool pprof -tags` of `pb`, or `None` where `go` is not installed
/// ([`jeprof_conformance::require_go`]).
fn go_tags(pb: &Path) -> Option<String> {
    let go = jeprof_conformance::require_go()?;
    let scratch = pb.parent().expect("the profile is in a directory");
    let file = pb.to_str().expect("a UTF-8 path");
    Some(jeprof_conformance::go_pprof(&go, scratch, &["-tags", file]))
}

#[test]
fn pprof_samples_carry_the_dumps_labels_and_the_command_lines_and_go_pprof_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("labelled.heap");
    labelled_dump(&dump);
    let pb = dir.path().join("out.pb.gz");
    common::run_ok(&[
        "pprof",
        "--label",
        "env=prod",
        "--label",
        "region=us-east-1",
        "-o",
        pb.to_str().unwrap(),
        dump.to_str().unwrap(),
    ]);
    let labels = sample_labels(&pb);
    assert!(!labels.is_empty());
    for sample in &labels {
        assert_eq!(
            sample,
            &["program=kv-store", "region=us-east-1", "env=prod"]
        );
    }
    if let Some(tags) = go_tags(&pb) {
        for want in [
            " env: Total",
            ": prod",
            " program: Total",
            ": kv-store",
            ": us-east-1",
        ] {
            assert!(tags.contains(want), "{want:?} in\n{tags}");
        }
        assert!(!tags.contains("eu-west-1"), "{tags}");
    }
}

#[test]
fn merge_writes_its_labels_into_pprof_samples_and_heap_v2_label_lines() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("labelled.heap");
    labelled_dump(&dump);
    let pb = dir.path().join("merged.pb.gz");
    let heap = dir.path().join("merged.heap");
    let a = common::fixtures().join("a.heap");
    for (format, out) in [("pprof", &pb), ("heap_v2", &heap)] {
        common::run_ok(&[
            "merge",
            "--format",
            format,
            "--label",
            "fleet=all",
            "-o",
            out.to_str().unwrap(),
            dump.to_str().unwrap(),
            a.to_str().unwrap(),
        ]);
    }
    // A merge of several dumps is no one dump: only the command line's labels.
    for sample in sample_labels(&pb) {
        assert_eq!(sample, ["fleet=all"]);
    }
    if let Some(tags) = go_tags(&pb) {
        assert!(
            tags.contains(" fleet: Total") && tags.contains(": all"),
            "{tags}"
        );
    }
    let merged = jeprof_dumpfmt::read::read_file(&heap).unwrap();
    assert_eq!(merged.labels, [("fleet".to_string(), "all".to_string())]);
}
