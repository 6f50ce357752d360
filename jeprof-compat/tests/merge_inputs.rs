//! `merge`'s inputs: dumps listed in a file (`--inputs-from FILE`, or `-` for standard input) and
//! directories (`--inputs-dir DIR`) merge exactly as the same dumps given as arguments; a bad dump in the middle of many
//! stops the merge with the reader's error (its file and line), exit 2, and no output file; cut
//! dumps are taken with `--allow-truncated`; the output is the same bytes whatever the number of
//! workers.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The fixtures every case merges: a raw dump, another, and a symbolized one.
const FIXTURES: [&str; 3] = ["a.heap", "b.heap", "symbolized.heap"];

fn text(path: &Path) -> String {
    path.to_str().expect("UTF-8 path").to_string()
}

/// Copies of the fixtures, `copies` times over, as `dump-NNN.heap` in `dir` (in name order: the
/// fixtures in turn).
fn fleet(dir: &Path, copies: usize) -> Vec<PathBuf> {
    (0..copies * FIXTURES.len())
        .map(|i| {
            let path = dir.join(format!("dump-{i:03}.heap"));
            std::fs::copy(common::fixtures().join(FIXTURES[i % FIXTURES.len()]), &path)
                .expect("copy a fixture");
            path
        })
        .collect()
}

/// Runs the binary with `stdin` on its standard input.
fn run_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the jeprof-compat binary runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn succeeded(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The one line a failed run printed, checked to be one line with exit status 2.
fn error_line(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err:?}");
    err.trim_end().to_string()
}

#[test]
fn a_list_a_directory_and_standard_input_merge_the_same_bytes_as_the_dumps_as_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let dumps_dir = dir.path().join("dumps");
    std::fs::create_dir(&dumps_dir).unwrap();
    let dumps = fleet(&dumps_dir, 4);
    // Left out of a directory: a hidden file (an unfinished atomic write) and a subdirectory.
    std::fs::write(dumps_dir.join(".dump-999.heap.x1y2.tmp"), "not a dump\n").unwrap();
    std::fs::create_dir(dumps_dir.join("older")).unwrap();
    std::fs::write(dumps_dir.join("older/junk.heap"), "not a dump\n").unwrap();
    let out = |name: &str| text(&dir.path().join(name));

    let mut args = vec!["merge".to_string(), "-o".into(), out("args.heap")];
    args.extend(dumps.iter().map(|p| text(p)));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeded(&common::run(&args), "dumps as arguments");
    let want = std::fs::read(out("args.heap")).unwrap();

    // A list with comments, blank lines and white space around its paths.
    let mut list = String::from("# the fleet's dumps\n\n");
    for (i, p) in dumps.iter().enumerate() {
        list.push_str(&if i % 2 == 0 {
            format!("{}\n", text(p))
        } else {
            format!("  {}\t\r\n", text(p))
        });
        if i == 5 {
            list.push_str("   # a comment after white space\n   \n");
        }
    }
    let list_path = dir.path().join("dumps.txt");
    std::fs::write(&list_path, &list).unwrap();
    succeeded(
        &common::run(&[
            "merge",
            "-o",
            &out("list.heap"),
            "--inputs-from",
            &text(&list_path),
        ]),
        "--inputs-from FILE",
    );
    succeeded(
        &run_with_stdin(
            &["merge", "-o", &out("stdin.heap"), "--inputs-from", "-"],
            &list,
        ),
        "--inputs-from -",
    );
    succeeded(
        &common::run(&[
            "merge",
            "-o",
            &out("dir.heap"),
            "--inputs-dir",
            &text(&dumps_dir),
        ]),
        "a directory",
    );
    // Arguments first, then the lists: the first dump as an argument, the rest through a list.
    std::fs::write(
        dir.path().join("rest.txt"),
        dumps[1..]
            .iter()
            .map(|p| text(p) + "\n")
            .collect::<String>(),
    )
    .unwrap();
    succeeded(
        &common::run(&[
            "merge",
            "-o",
            &out("mixed.heap"),
            &text(&dumps[0]),
            "--inputs-from",
            &out("rest.txt"),
        ]),
        "an argument and a list",
    );
    for name in ["list.heap", "stdin.heap", "dir.heap", "mixed.heap"] {
        assert!(
            std::fs::read(out(name)).unwrap() == want,
            "{name} differs from the merge of the same dumps as arguments"
        );
    }
}

#[test]
fn the_merged_bytes_do_not_depend_on_the_number_of_workers() {
    let dir = tempfile::tempdir().unwrap();
    let dumps_dir = dir.path().join("dumps");
    std::fs::create_dir(&dumps_dir).unwrap();
    // 30 chunks of 16 dumps and a partial one: every worker gets several.
    fleet(&dumps_dir, 165);
    let mut first: Option<Vec<u8>> = None;
    for jobs in ["1", "2", "3", "8"] {
        let out = text(&dir.path().join(format!("jobs{jobs}.heap")));
        succeeded(
            &common::run(&[
                "merge",
                "--jobs",
                jobs,
                "-o",
                &out,
                "--inputs-dir",
                &text(&dumps_dir),
            ]),
            jobs,
        );
        let bytes = std::fs::read(&out).unwrap();
        match &first {
            None => first = Some(bytes),
            Some(want) => assert!(bytes == *want, "--jobs {jobs} wrote other bytes"),
        }
    }
}

#[test]
fn a_bad_dump_in_the_middle_exits_2_naming_its_file_and_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dumps_dir = dir.path().join("dumps");
    std::fs::create_dir(&dumps_dir).unwrap();
    let dumps = fleet(&dumps_dir, 30);
    // Dump 47 of 90: its line 3 (of a raw fixture, a stack line) broken.
    let bad = &dumps[47];
    let mut lines: Vec<String> = std::fs::read_to_string(bad)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let at = lines.iter().position(|l| l.starts_with("@ ")).unwrap();
    lines[at] = "@ 0xnot-an-address".to_string();
    std::fs::write(bad, lines.join("\n") + "\n").unwrap();
    let list = dir.path().join("dumps.txt");
    std::fs::write(
        &list,
        dumps.iter().map(|p| text(p) + "\n").collect::<String>(),
    )
    .unwrap();
    let output = dir.path().join("out.heap");
    let want = format!("{}:{}:", text(bad), at + 1);
    for (what, args) in [
        ("a list", vec!["--inputs-from".to_string(), text(&list)]),
        (
            "a directory",
            vec!["--inputs-dir".to_string(), text(&dumps_dir)],
        ),
    ] {
        for jobs in ["1", "2"] {
            let mut all = vec!["merge", "--jobs", jobs, "-o", output.to_str().unwrap()];
            all.extend(args.iter().map(String::as_str));
            let err = error_line(&common::run(&all), what);
            assert!(err.contains(&want), "{what}: {err} does not name {want}");
            assert!(!output.exists(), "{what}: a failed merge wrote its output");
        }
    }
    // Nothing beside the output either (no temporary file left behind).
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

#[test]
fn a_cut_dump_in_a_list_fails_strictly_and_merges_with_allow_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let dumps_dir = dir.path().join("dumps");
    std::fs::create_dir(&dumps_dir).unwrap();
    let dumps = fleet(&dumps_dir, 10);
    // A copy cut in the middle of its last stack's counts.
    let cut = &dumps[13];
    let whole = std::fs::read_to_string(cut).unwrap();
    let maps = whole.find("\nMAPPED_LIBRARIES").unwrap();
    std::fs::write(cut, &whole[..maps - 4]).unwrap();
    let list = dir.path().join("dumps.txt");
    std::fs::write(
        &list,
        dumps.iter().map(|p| text(p) + "\n").collect::<String>(),
    )
    .unwrap();
    let output = text(&dir.path().join("out.heap"));
    let strict = common::run(&["merge", "-o", &output, "--inputs-from", &text(&list)]);
    let err = error_line(&strict, "a cut dump");
    assert!(
        err.contains(&text(cut)) && err.contains("truncated dump"),
        "{err}"
    );
    assert!(!Path::new(&output).exists());

    let lenient = common::run(&[
        "merge",
        "--allow-truncated",
        "-o",
        &output,
        "--inputs-from",
        &text(&list),
    ]);
    succeeded(&lenient, "--allow-truncated");
    let err = String::from_utf8_lossy(&lenient.stderr);
    assert!(err.contains("warning") && err.contains(&text(cut)), "{err}");
    assert!(Path::new(&output).exists());
}

#[test]
fn unreadable_lists_and_empty_inputs_exit_2_saying_which_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.heap");
    let out = output.to_str().unwrap();
    let dump = text(&common::fixtures().join("a.heap"));

    let missing = text(&dir.path().join("missing.txt"));
    let err = error_line(
        &common::run(&["merge", "-o", out, "--inputs-from", &missing]),
        "a missing list",
    );
    assert!(
        err.contains(&format!("{missing}: cannot read the list of dumps")),
        "{err}"
    );

    // Line 3 is not UTF-8: the list's own line is named.
    let latin1 = dir.path().join("latin1.txt");
    let mut bytes = format!("{dump}\n# caf\u{e9}\n").into_bytes();
    bytes.extend_from_slice(b"/dumps/caf\xe9.heap\n");
    std::fs::write(&latin1, bytes).unwrap();
    let err = error_line(
        &common::run(&["merge", "-o", out, "--inputs-from", &text(&latin1)]),
        "a line that is not UTF-8",
    );
    assert!(
        err.contains(&format!("{}:3: not UTF-8", text(&latin1))),
        "{err}"
    );

    // A list naming a dump that does not exist: the reader's error names that dump.
    let absent = dir.path().join("absent.txt");
    std::fs::write(&absent, format!("{dump}\n/nonexistent/app.1.0.f.heap\n")).unwrap();
    let err = error_line(
        &common::run(&["merge", "-o", out, "--inputs-from", &text(&absent)]),
        "a listed dump that does not exist",
    );
    assert!(err.contains("/nonexistent/app.1.0.f.heap"), "{err}");

    // Nothing to merge: an empty directory, a list of comments.
    let empty_dir = dir.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let comments = dir.path().join("comments.txt");
    std::fs::write(&comments, "# nothing yet\n\n").unwrap();
    for args in [
        vec![
            "merge",
            "-o",
            out,
            "--inputs-dir",
            empty_dir.to_str().unwrap(),
        ],
        vec![
            "merge",
            "-o",
            out,
            "--inputs-from",
            comments.to_str().unwrap(),
        ],
    ] {
        let err = error_line(&common::run(&args), "no dumps");
        assert!(err.contains("no dumps to merge"), "{args:?}: {err}");
    }
    // A directory given where a dump goes is still refused (it is `--inputs-dir DIR`).
    let err = error_line(
        &common::run(&["merge", "-o", out, empty_dir.to_str().unwrap()]),
        "a directory as a dump",
    );
    assert!(err.contains("not a regular file"), "{err}");
    // Neither dumps nor a list: a usage error.
    assert_eq!(common::run(&["merge", "-o", out]).status.code(), Some(2));
    assert!(!output.exists(), "a failed merge wrote its output");
}
