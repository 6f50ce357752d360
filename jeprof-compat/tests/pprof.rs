//! `pprof` output: decodes as profile.proto with the four sample types and symbolized locations, its
//! totals are ours, and `go tool pprof -top` prints the same totals (when `go` is installed; under
//! `CI=true` it must be).

mod common;

use jeprof_compat::pprof::read_gz;

fn fixture(name: &str) -> String {
    common::fixtures().join(name).display().to_string()
}

fn total_of(report: &str) -> f64 {
    let first = report.lines().next().unwrap();
    first
        .strip_prefix("Total: ")
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn pprof_file_holds_the_unbiased_figures_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.pb.gz");
    common::run_ok(&[
        "pprof",
        "-o",
        out.to_str().unwrap(),
        &fixture("symbolized.heap"),
    ]);
    let pb = read_gz(&std::fs::read(&out).unwrap()).unwrap();
    let types: Vec<(&str, &str)> = pb
        .sample_type
        .iter()
        .map(|t| {
            (
                pb.string_table[t.r#type as usize].as_str(),
                pb.string_table[t.unit as usize].as_str(),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("inuse_objects", "count"),
            ("inuse_space", "bytes"),
            ("alloc_objects", "count"),
            ("alloc_space", "bytes")
        ]
    );
    assert_eq!(pb.period, 524288);
    for (column, flags) in [
        (1usize, vec!["--show_bytes"]),
        (0, vec!["--inuse_objects"]),
        (3, vec!["--alloc_space", "--show_bytes"]),
    ] {
        let sum: i64 = pb.sample.iter().map(|s| s.value[column]).sum();
        let mut args = vec!["report"];
        args.extend(flags);
        let f = fixture("symbolized.heap");
        args.push(&f);
        let want = total_of(&common::run_ok(&args));
        // Each sample is rounded; the report truncates the exact sum.
        assert!(
            (sum as f64 - want).abs() <= pb.sample.len() as f64,
            "column {column}: {sum} vs {want}"
        );
    }
    let names: Vec<&str> = pb
        .function
        .iter()
        .map(|f| pb.string_table[f.name as usize].as_str())
        .collect();
    assert!(
        names.contains(&"leaf_alloc") && names.contains(&"inlined_helper"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"malloc"),
        "allocator frames removed: {names:?}"
    );
}

#[test]
fn pprof_of_a_raw_dump_has_its_mappings() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.pb.gz");
    let prog = fixture("prog_pie");
    common::run_ok(&[
        "pprof",
        "--binary",
        &prog,
        "-o",
        out.to_str().unwrap(),
        &fixture("pie.heap"),
    ]);
    let pb = read_gz(&std::fs::read(&out).unwrap()).unwrap();
    assert!(pb.mapping.iter().any(
        |m| pb.string_table[m.filename as usize].ends_with("prog_pie")
            && m.memory_start == 0x555555555000
    ));
    assert!(pb
        .location
        .iter()
        .all(|l| l.mapping_id != 0 || l.line.is_empty()));
}

#[test]
fn go_tool_pprof_prints_our_totals() {
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    let Some(real) = common::real_dump() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let re = regex::Regex::new(r"of (\d+)B total").unwrap();
    for (dump, label) in [
        (real.display().to_string(), "real"),
        (fixture("symbolized.heap"), "symbolized"),
    ] {
        let out = dir.path().join(format!("{label}.pb.gz"));
        common::run_ok(&["pprof", "-o", out.to_str().unwrap(), &dump]);
        let want = total_of(&common::run_ok(&[
            "report",
            "--show_bytes",
            "--keep_alloc_frames",
            &dump,
        ]));
        let top = std::process::Command::new(&go)
            .args([
                "tool",
                "pprof",
                "-top",
                "-sample_index=inuse_space",
                "-unit=byte",
                out.to_str().unwrap(),
            ])
            .env("PPROF_BINARY_PATH", dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&top.stdout);
        assert!(
            top.status.success(),
            "go tool pprof failed: {}",
            String::from_utf8_lossy(&top.stderr)
        );
        // "Showing nodes accounting for 2161886B, 100% of 2161886B total"
        let total: f64 = re
            .captures(&text)
            .unwrap_or_else(|| panic!("no total in go tool pprof output:\n{text}"))[1]
            .parse()
            .unwrap();
        assert!(
            (total - want).abs() <= 471.0,
            "{label}: go tool pprof {total} B, ours {want} B"
        );
    }
}

/// A dump of a program started by a link (`prog`, to `prog-real`) whose only sample lies in a
/// library mapped above it, as a preloaded redis-server's libcrypto stacks.
fn dump_of_a_linked_program(dir: &std::path::Path) -> std::path::PathBuf {
    use jeprof_dumpfmt::build_ids::{to_annotations, BuildId};
    use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack};
    let real = dir.join("prog-real");
    std::fs::write(&real, "not an ELF file").unwrap();
    std::os::unix::fs::symlink(&real, dir.join("prog")).unwrap();
    let mut p = Profile::new(4096);
    p.mapped_libraries = Some(format!(
        "1000-2000 r-xp 00000000 00:00 1 {}\n7000-8000 r-xp 00000000 00:00 2 /usr/lib/libcrypto.so.3\n",
        real.display()
    ));
    let estimate = Estimate {
        objects: 1.0,
        bytes: 4096.0,
        ..Estimate::default()
    };
    p.stacks.push(Stack {
        frames: vec![0x7100],
        counts: Counts {
            inuse: estimate,
            accum: estimate,
        },
        threads: Vec::new(),
    });
    p.annotations = to_annotations(&[
        BuildId {
            path: real.display().to_string(),
            id: "aa01".into(),
        },
        BuildId {
            path: "/usr/lib/libcrypto.so.3".into(),
            id: "cc03".into(),
        },
    ]);
    p.labels = vec![
        ("program".into(), "prog".into()),
        ("build_id".into(), "aa01".into()),
    ];
    let path = dir.join("prog.heap");
    jeprof_dumpfmt::write::write_file(&p, &path, &Default::default()).unwrap();
    path
}

#[test]
fn pprof_and_otlp_of_a_dump_put_the_program_first_named_as_it_was_started() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dump_of_a_linked_program(dir.path());
    let out = dir.path().join("p.pb.gz");
    common::run_ok(&["pprof", "-o", out.to_str().unwrap(), dump.to_str().unwrap()]);
    let pb = read_gz(&std::fs::read(&out).unwrap()).unwrap();
    let text = |i: i64| pb.string_table[i as usize].as_str();
    let mappings: Vec<(&str, &str)> = pb
        .mapping
        .iter()
        .map(|m| (text(m.filename), text(m.build_id)))
        .collect();
    let started = dir.path().join("prog").display().to_string();
    assert_eq!(
        mappings,
        [
            (started.as_str(), "aa01"),
            ("/usr/lib/libcrypto.so.3", "cc03")
        ]
    );
    let otlp = dir.path().join("p.otlp");
    common::run_ok(&["otlp", "-o", otlp.to_str().unwrap(), dump.to_str().unwrap()]);
    let request = jeprof_compat::otlp::decode(&std::fs::read(&otlp).unwrap()).unwrap();
    let d = request.dictionary.unwrap();
    // Index 0 is the zero value every OTLP table starts with.
    assert_eq!(
        d.string_table[d.mapping_table[1].filename_strindex as usize],
        started
    );
}
