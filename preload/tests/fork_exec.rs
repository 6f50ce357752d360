//! `fork` and `exec` under the preload (`programs/forks.c`): with `%p` in `dump_on_exit`, the
//! parent, a child that only forks and a child that forks and execs each write a dump of their
//! own, which parses and names that process's own allocation site; the exec'd image (which re-read
//! `JEPROF_SHIM`) has none of the parent's samples. The forks happen while a worker thread of the
//! parent allocates.

mod common;

use common::{preloaded, read_dump, run_ok};

const SITES: [&str; 3] = ["parent_site", "fork_child_site", "exec_child_site"];

/// Which of the three sites the dump's live samples name.
fn sites_in(profile: &jeprof_dumpfmt::Profile) -> Vec<&'static str> {
    SITES
        .iter()
        .copied()
        .filter(|site| {
            profile.stacks.iter().any(|stack| {
                !stack.counts.inuse.is_zero()
                    && common::site_of(profile, &stack.frames, &[site], |n, s| n == s).is_some()
            })
        })
        .collect()
}

/// `programs/forks.c` built as `dir/forks`.
fn compile_forks(dir: &std::path::Path) -> std::path::PathBuf {
    let program = dir.join("forks");
    let mut flags = common::PROGRAM_FLAGS.to_vec();
    flags.push("-pthread");
    common::compile(
        &jeprof_conformance::target_c_compiler(),
        &[common::program_source("forks.c")],
        &flags,
        &program,
    );
    program
}

#[test]
fn fork_and_exec_children_write_their_own_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let program = compile_forks(dir.path());

    let pattern = dir.path().join("heap.%p.prof");
    let output = run_ok(preloaded(
        common::program(&program),
        &format!("sample_rate:4096,dump_on_exit:{}", pattern.display()),
    ));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let pid_of = |kind: &str| -> u32 {
        stdout
            .lines()
            .find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    ["child", pid, k] if *k == kind => pid.parse().ok(),
                    ["parent", pid] if kind == "parent" => pid.parse().ok(),
                    _ => None,
                }
            })
            .unwrap_or_else(|| panic!("no {kind} pid in {stdout}"))
    };
    let dump_of = |kind: &str| {
        let path = dir.path().join(format!("heap.{}.prof", pid_of(kind)));
        read_dump(&path)
    };

    // The parent's dump: its own site; not the children's (their samples are theirs).
    assert_eq!(sites_in(&dump_of("parent")), ["parent_site"]);
    // The forked child inherited the parent's live samples (its copy of the parent's memory)
    // and added its own.
    assert_eq!(
        sites_in(&dump_of("fork")),
        ["parent_site", "fork_child_site"]
    );
    // The exec'd image started afresh.
    assert_eq!(sites_in(&dump_of("exec")), ["exec_child_site"]);
    // Exactly these three processes dumped (the pattern gave each its own file).
    assert_eq!(dumps_in(dir.path()), 3);
}

/// The dumps (`heap.<pid>.prof`) in `dir`.
fn dumps_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("heap.") && name.ends_with(".prof")
        })
        .count()
}

/// `program:forks`: the same binary started as `wrapper` (with its forked and exec'd children,
/// which inherit the setting) passes through and leaves no dump; started as `forks`, its three
/// processes dump as above.
#[test]
fn a_program_that_program_does_not_name_leaves_no_dumps_nor_do_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let named = compile_forks(dir.path());
    let wrapper = dir.path().join("wrapper");
    std::fs::copy(&named, &wrapper).unwrap();
    let out = tempfile::tempdir().unwrap();
    let settings = format!(
        "program:forks,sample_rate:4096,dump_on_exit:{}",
        out.path().join("heap.%p.prof").display()
    );

    run_ok(preloaded(common::program(&wrapper), &settings));
    assert_eq!(
        dumps_in(out.path()),
        0,
        "the wrapper and its children dumped"
    );
    run_ok(preloaded(common::program(&named), &settings));
    assert_eq!(
        dumps_in(out.path()),
        3,
        "the named program and its children"
    );
}
