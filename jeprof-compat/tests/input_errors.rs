//! `--binary` and the program argument are checked, never silently ignored: a program that does
//! not exist, is not a program, or matches no mapping of a raw dump is an error (exit 2, one line
//! saying what the dump maps); jeprof's `PROGRAM DUMP...` form works; jeprof's one-dash options
//! work; help wraps at the terminal's width.

mod common;

fn fixture(name: &str) -> String {
    common::fixtures().join(name).display().to_string()
}

/// Runs the binary with extra environment variables; returns stdout, failing on a non-zero exit.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the jeprof-compat binary runs");
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command expected to fail; returns its one stderr line, without the newline.
fn error_line(args: &[&str]) -> String {
    let out = common::run(args);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    err.trim_end().to_string()
}

#[test]
fn a_binary_that_does_not_exist_is_an_error_in_every_subcommand() {
    let dump = fixture("nonpie.heap");
    let missing = "/nonexistent/app";
    let want = format!("jeprof-compat: --binary {missing}: No such file or directory (os error 2)");
    for args in [
        &["report", "--binary", missing, &dump][..],
        &["report", "--collapsed", "--binary", missing, &dump],
        &["pprof", "-o", "/dev/null", "--binary", missing, &dump],
        &["merge", "-o", "/dev/null", "--binary", missing, &dump],
        &["diff", "--binary", missing, &dump, &dump],
        // A dump with a symbol section needs no program, but a wrong one is still a mistake.
        &["report", "--binary", missing, &fixture("symbolized.heap")],
    ] {
        assert_eq!(error_line(args), want, "{args:?}");
    }
}

#[test]
fn a_binary_whose_name_no_mapping_has_is_an_error_naming_the_mappings() {
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("renamed_app");
    std::fs::copy(fixture("prog"), &renamed).unwrap();
    let renamed = renamed.to_str().unwrap();
    for (dump, mapped) in [
        ("nonpie.heap", "/opt/app/prog"),
        ("pie.heap", "/opt/app/prog_pie"),
    ] {
        let dump = fixture(dump);
        let want = format!(
            "jeprof-compat: --binary {renamed}: {dump} maps no file of that name (it maps \
             {mapped}); give the program that wrote the dump, under its own file name"
        );
        for args in [
            &["report", "--binary", renamed, &dump][..],
            &[
                "report",
                "--flamegraph",
                "/dev/null",
                "--binary",
                renamed,
                &dump,
            ],
            &["merge", "-o", "/dev/null", "--binary", renamed, &dump],
            &["pprof", "-o", "/dev/null", "--binary", renamed, &dump],
            &["diff", "--binary", renamed, &dump, &dump],
        ] {
            assert_eq!(error_line(args), want, "{args:?}");
        }
    }
    // The same program under the mapping's name is accepted wherever it lies.
    let same = dir.path().join("prog");
    std::fs::copy(fixture("prog"), &same).unwrap();
    let text = common::run_ok(&[
        "report",
        "--show_bytes",
        "--binary",
        same.to_str().unwrap(),
        &fixture("nonpie.heap"),
    ]);
    assert!(text.contains(" leaf_alloc\n"), "{text}");
}

#[test]
fn a_binary_that_is_not_a_program_is_an_error() {
    let dump = fixture("nonpie.heap");
    assert_eq!(
        error_line(&["report", "--binary", &dump, &dump]),
        format!(
            "jeprof-compat: --binary {dump}: not an executable or shared object (ELF, Mach-O or PE)"
        )
    );
}

#[test]
fn jeprofs_program_then_dumps_form_reads_as_binary() {
    let prog = fixture("prog");
    let dump = fixture("nonpie.heap");
    let positional = common::run_ok(&["report", "--show_bytes", &prog, &dump]);
    let flag = common::run_ok(&["report", "--show_bytes", "--binary", &prog, &dump]);
    assert_eq!(positional, flag);
    assert!(positional.contains(" leaf_alloc\n"), "{positional}");
    // A program alone, or with --binary too, says what to write instead.
    assert_eq!(
        error_line(&["report", &prog]),
        format!(
            "jeprof-compat: {prog}: a program, not a heap dump; give the dumps after it \
             (`PROGRAM DUMP...`, as jeprof takes them) or use --binary PROGRAM DUMP..."
        )
    );
    assert_eq!(
        error_line(&["pprof", "-o", "/dev/null", "--binary", &prog, &prog, &dump]),
        format!(
            "jeprof-compat: {prog}: a program, not a heap dump, and --binary is given too; give \
             one program"
        )
    );
}

#[test]
fn long_options_take_one_dash_as_in_jeprof() {
    let dump = fixture("symbolized.heap");
    let one = common::run_ok(&["report", "-text", "-show_bytes", "-focus=mid_", &dump]);
    let two = common::run_ok(&["report", "--text", "--show_bytes", "--focus=mid_", &dump]);
    assert_eq!(one, two);
    // A value after its option is left alone, even when it starts with one dash.
    let spaced = common::run_ok(&["report", "-show_bytes", "-focus", "mid_", &dump]);
    assert_eq!(spaced, two);
    // Short options are still short, and unknown words still errors.
    let out = common::run(&["report", "-text", "-bogus", &dump]);
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let pb = dir.path().join("x.pb.gz");
    common::run_ok(&["pprof", "-o", pb.to_str().unwrap(), &dump]);
    assert!(pb.is_file());
}

#[test]
fn help_wraps_at_the_terminal_width_and_never_mid_sentence() {
    for width in [60usize, 100] {
        let columns = width.to_string();
        for sub in ["report", "merge", "pprof", "diff"] {
            let help = run_env(&[sub, "--help"], &[("COLUMNS", &columns), ("LINES", "40")]);
            let lines: Vec<&str> = help.lines().collect();
            // (clap's own usage line is never wrapped.)
            for line in lines.iter().filter(|l| !l.starts_with("Usage:")) {
                assert!(
                    line.chars().count() <= width,
                    "{sub}: {line:?} wider than {width}"
                );
            }
            // Paragraph text is wrapped greedily: a line ends early only where the next word
            // would not fit (a break of our own in the text would end one sooner).
            for pair in lines.windows(2) {
                let (line, next) = (pair[0], pair[1]);
                if line.is_empty()
                    || next.is_empty()
                    || line.starts_with(' ')
                    || next.starts_with(' ')
                {
                    continue;
                }
                let word = next.split(' ').next().unwrap_or("");
                assert!(
                    line.chars().count() + 1 + word.chars().count() > width,
                    "{sub} at {width} columns: {line:?} ends before {word:?}"
                );
            }
        }
    }
    // Nothing lost in the wrapping.
    let report = run_env(&["report", "--help"], &[("COLUMNS", "60"), ("LINES", "40")]);
    let words = report.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("With --interval two columns give the 95% confidence interval"));
}

/// `gzip`/`gunzip` of `from` into `to` (`-d`: decompress).
fn gzip(args: &[&str], from: &std::path::Path, to: &std::path::Path) {
    let out = std::process::Command::new("gzip")
        .args(args)
        .arg("-c")
        .arg(from)
        .output()
        .expect("gzip runs");
    assert!(out.status.success(), "gzip {args:?} {from:?}");
    std::fs::write(to, out.stdout).unwrap();
}

/// A gzipped dump (as fleets store them) reads as the dump does; a pprof profile, gzipped or
/// not, is named for what it is, with what to do; a directory gets the glob to use.
#[test]
fn a_gzipped_dump_is_read_a_pprof_file_is_named_and_a_directory_gets_its_glob() {
    let dir = tempfile::tempdir().unwrap();
    let dump = fixture("symbolized.heap");
    let plain = common::run_ok(&["report", "--show_bytes", &dump]);
    let gz = dir.path().join("heap.prof.gz");
    gzip(&[], std::path::Path::new(&dump), &gz);
    assert_eq!(
        common::run_ok(&["report", "--show_bytes", gz.to_str().unwrap()]),
        plain
    );

    let pb = dir.path().join("heap.pb.gz");
    common::run_ok(&["pprof", "-o", pb.to_str().unwrap(), &dump]);
    let raw = dir.path().join("heap.pb");
    gzip(&["-d"], &pb, &raw);
    for (file, gzipped) in [(&pb, true), (&raw, false)] {
        let out = common::run(&["report", file.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("a pprof profile") && err.contains("go tool pprof"),
            "{err}"
        );
        assert_eq!(err.contains("gzip-compressed"), gzipped, "{err}");
    }

    let out = common::run(&["report", dir.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/*.heap") && !err.contains("save the stream"),
        "{err}"
    );
}

/// An output file in a directory that does not exist is refused naming the user's path and its
/// directory, never the temporary file the write goes through; `leaks` on one dump asks for the
/// series it reads.
#[test]
fn an_output_in_a_missing_directory_names_the_users_path_and_leaks_on_one_dump_asks_for_a_series() {
    let dump = fixture("symbolized.heap");
    let out = common::run(&["report", "--html", "/no/such/dir/x.html", &dump]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/no/such/dir/x.html")
            && err.contains("/no/such/dir does not exist")
            && !err.contains(".tmp"),
        "{err}"
    );
    let out = common::run(&["leaks", &dump]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("series of dumps") && !err.contains("more often"),
        "{err}"
    );
}

/// A profile URL where nothing listens says so, and names the setting that starts the listener.
#[test]
fn a_refused_connection_names_the_setting_that_starts_the_listener() {
    // A port that was free a moment ago: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/pprof/heap");
    let out = common::run(&["report", &url]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&url) && err.contains("JEPROF_SHIM=http:"),
        "{err}"
    );
}

#[test]
fn dash_h_fits_one_screen_and_dash_dash_help_is_the_whole_manual() {
    let env = [("COLUMNS", "100"), ("LINES", "50")];
    let top = run_env(&["-h"], &env);
    assert!(top.lines().count() <= 50, "jeprof-compat -h:\n{top}");
    assert!(top.contains("COMMAND -h"), "{top}");
    for sub in [
        "report",
        "merge",
        "pprof",
        "otlp",
        "diff",
        "leaks",
        "symbolize",
        "export",
        "query",
    ] {
        let short = run_env(&[sub, "-h"], &env);
        let long = run_env(&[sub, "--help"], &env);
        if sub == "query" && short.contains("which this build was made without") {
            // A build without the `sql` feature has no query options to explain.
            continue;
        }
        assert!(
            short.lines().count() <= 50,
            "{sub} -h is {} lines:\n{short}",
            short.lines().count()
        );
        assert!(
            short.ends_with("Examples, and what each figure means: --help\n"),
            "{sub} -h:\n{short}"
        );
        assert!(
            long.lines().count() > short.lines().count(),
            "{sub} --help adds nothing"
        );
        // Every option -h names, --help explains.
        for option in short.split_whitespace().filter(|w| w.starts_with("--")) {
            assert!(long.contains(option), "{sub}: {option}");
        }
    }
}

/// The lines of `diff --help`'s example between its command and the first blank line.
fn diff_help_example() -> (String, Vec<String>) {
    let help = run_env(&["diff", "--help"], &[("COLUMNS", "200")]);
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("jeprof-compat diff"));
    let command = lines.next().expect("an example").trim().to_string();
    let shown = lines
        .take_while(|l| !l.is_empty())
        .map(|l| l.strip_prefix("      ").unwrap_or(l).to_string())
        .collect();
    (command, shown)
}

#[test]
fn diff_help_example_is_what_diff_prints_and_fits_80_columns() {
    let (command, shown) = diff_help_example();
    let args: Vec<String> = command
        .split_whitespace()
        .skip(1)
        .map(|a| match a.strip_suffix(".heap") {
            Some(name) => fixture(&format!("{name}.heap")),
            None => a.to_string(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let printed = run_env(&args, &[]);
    let printed: Vec<&str> = printed.lines().collect();
    assert!(!shown.is_empty());
    for (i, line) in shown.iter().enumerate() {
        assert!(line.chars().count() + 6 <= 80, "{line:?} wider than 80");
        assert_eq!(Some(line.as_str()), printed.get(i).copied(), "line {i}");
    }
}
