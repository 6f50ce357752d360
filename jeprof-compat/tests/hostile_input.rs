//! What a careless user or an attacker hands the CLI: devices and pipes instead of dumps, dumps
//! cut while being written, figures past Perl's integers, and symlinks planted at output paths.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary, killing it if it has not finished within `limit` (a hang guard: refusing a
/// device or a pipe takes no time at all, so the limit only has to be far above a loaded
/// machine's start-up time).
fn run_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("jeprof-compat {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn devices_and_pipes_are_refused_at_once_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.heap");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let fifo = fifo.to_str().unwrap();
    for (input, kind) in [
        ("/dev/zero", "character device"),
        ("/dev/urandom", "character device"),
        (fifo, "FIFO"),
        ("/", "directory"),
    ] {
        for sub in [&["report", input][..], &["merge", "-o", "/dev/null", input]] {
            let out = run_within(sub, Duration::from_secs(10));
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{sub:?}: {err}");
            assert!(
                err.contains(input) && err.contains(kind) && err.contains("not a regular file"),
                "{sub:?}: {err}"
            );
        }
    }
}

/// `fixtures/compat/pie.heap`: a raw dump as jemalloc writes it, memory map last.
fn pie() -> String {
    std::fs::read_to_string(common::fixtures().join("pie.heap")).unwrap()
}

#[test]
fn cut_dumps_exit_2_naming_their_last_line_and_allow_truncated_reads_them_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let whole = pie();
    let maps = whole.find("\nMAPPED_LIBRARIES").unwrap() + 1;
    let last_at = whole[..maps - 1].rfind("\n@ ").unwrap() + 1;
    let cases = [
        ("boundary.heap", &whole[..maps], "MAPPED_LIBRARIES"),
        ("stack.heap", &whole[..last_at + 10], "middle of line"),
        ("maps.heap", &whole[..whole.len() - 5], "middle of line"),
    ];
    let binary = common::fixtures().join("prog_pie");
    for (name, text, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap();
        let line = text.lines().count();
        let out = common::run(&["report", "--show_bytes", path]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("{name}:{line}: truncated dump")),
            "{err}"
        );
        assert!(err.contains(says), "{name}: {err}");

        let out = common::run(&[
            "report",
            "--show_bytes",
            "--allow-truncated",
            "--binary",
            binary.to_str().unwrap(),
            path,
        ]);
        let err = stderr(&out);
        assert!(out.status.success(), "{name}: {err}");
        assert!(
            err.contains("warning") && err.contains(name) && err.contains(says),
            "{name}: {err}"
        );
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("Total: "));
    }
    // The stack cut inside its `@` line is dropped, and the warning says so.
    let out = common::run(&[
        "report",
        "--allow-truncated",
        dir.path().join("stack.heap").to_str().unwrap(),
    ]);
    assert!(stderr(&out).contains("dropped"), "{}", stderr(&out));
}

#[test]
fn figures_past_perls_integers_warn_and_intervals_print_the_numbers_they_are() {
    let dump = common::fixtures().join("../synthetic/near_u64_max.heap");
    let out = common::run(&[
        "report",
        "--show_bytes",
        "--interval",
        dump.to_str().unwrap(),
    ]);
    let (text, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(out.status.success(), "{err}");
    // jeprof prints `Total: -1 B` here; we print the same, and say why.
    assert!(text.contains("Total: -1 B"), "{text}");
    assert!(err.contains("2^63"), "{err}");
    for line in text.lines().filter(|l| l.contains('[')) {
        assert!(!line.contains(", -1]") && !line.contains("[-"), "{line}");
    }
    // The MB view holds the figures: no warning.
    let out = common::run(&["report", dump.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

#[test]
fn outputs_replace_a_planted_symlink_instead_of_writing_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let input = common::fixtures().join("symbolized.heap");
    let input = input.to_str().unwrap();
    for (name, args) in [
        ("out.heap", vec!["merge", "-o"]),
        ("out.pb.gz", vec!["pprof", "-o"]),
        ("out.pb", vec!["otlp", "-o"]),
        ("out.svg", vec!["report", "--flamegraph"]),
    ] {
        let target = dir.path().join(name);
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        let mut args = args.clone();
        args.push(target.to_str().unwrap());
        args.push(input);
        common::run_ok(&args);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.file_type().is_file(), "{name}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
    }
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 5, "no temporary file left behind");
}
