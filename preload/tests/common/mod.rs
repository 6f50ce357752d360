//! Shared by the preload tests: the library's path, building the test programs with the system's
//! C and C++ compilers, running them preloaded, and the attribution of a dump's stacks to the
//! programs' allocation sites by the dump's own symbol section.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jeprof_dumpfmt::model::symbol_key;
use jeprof_dumpfmt::{Estimate, Profile};

/// `libjeprof_preload.so` as cargo built it for this test run: the package's cdylib, in the
/// `deps/` folder beside the test binary (cargo copies it up to `<target>/<profile>/` only for
/// `cargo build`).
pub fn preload_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe
        .parent()
        .expect("the test binary lies in <target>/<profile>/deps");
    let library = deps.join("libjeprof_preload.so");
    assert!(
        library.is_file(),
        "{} is missing: cargo test -p jeprof-preload builds it",
        library.display()
    );
    library
}

/// The programs' sources, `preload/tests/programs/`.
pub fn program_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(name)
}

/// Compiles `sources` with `compiler` ([`jeprof_conformance::target_c_compiler`] or
/// [`jeprof_conformance::target_cxx_compiler`]: the test's target's) and `flags` into `out`; panics
/// with the compiler's messages on failure.
pub fn compile(compiler: &str, sources: &[PathBuf], flags: &[&str], out: &Path) {
    let result = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(out)
        .args(sources)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler} (install gcc/g++): {e}"));
    assert!(
        result.status.success(),
        "{compiler} failed on {sources:?}:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

/// The flags every test program is built with: optimised, no frame pointers (as C programs
/// usually are, so the unwinders must read `.eh_frame`), no sibling calls (a site's call to
/// `malloc` stays a call, so the site has a frame of its own), debug information for the names.
#[cfg(not(target_arch = "aarch64"))]
pub const PROGRAM_FLAGS: &[&str] = &[
    "-O2",
    "-g",
    "-fomit-frame-pointer",
    "-fno-optimize-sibling-calls",
];

/// On aarch64 also with signed return addresses (`-mbranch-protection=standard`, the default of
/// several distributions): every function that saves X30 signs it with pointer authentication, so
/// the unwinders must strip the code from each return address they read.
#[cfg(target_arch = "aarch64")]
pub const PROGRAM_FLAGS: &[&str] = &[
    "-O2",
    "-g",
    "-fomit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-mbranch-protection=standard",
];

/// A command running `program`, a test program built for the test's target: behind the runner
/// cargo ran the test with (`qemu-aarch64` in a cross build: [`jeprof_conformance::target_command`]).
/// Under qemu the preload variables set by [`preloaded`] reach the emulated program's loader; the
/// host's loader, starting qemu itself, says once on stderr that it ignores the aarch64 library.
pub fn program(program: &Path) -> Command {
    jeprof_conformance::target_command(program)
}

/// `command` with the library preloaded and `JEPROF_SHIM=settings`.
pub fn preloaded(mut command: Command, settings: &str) -> Command {
    command
        .env("LD_PRELOAD", preload_library())
        .env("JEPROF_SHIM", settings);
    command
}

/// Runs `command`, panicking with its output unless it exits 0.
pub fn run_ok(mut command: Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Reads and parses a heap_v2 dump.
pub fn read_dump(path: &Path) -> Profile {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("no dump at {}: {e}", path.display()));
    jeprof_dumpfmt::read::parse(&bytes)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()))
}

/// The names the dump's symbol section gives frame `index` of `frames` (innermost first; inlined
/// functions before the function they were inlined into).
pub fn frame_names(profile: &Profile, index: usize, frame: u64) -> &[String] {
    profile
        .symbols
        .as_ref()
        .and_then(|s| s.names.get(&symbol_key(index, frame)))
        .map_or(&[], Vec::as_slice)
}

/// Each frame's names (innermost first, inlined functions first).
pub fn stack_names(profile: &Profile, frames: &[u64]) -> Vec<Vec<String>> {
    frames
        .iter()
        .enumerate()
        .map(|(i, &f)| frame_names(profile, i, f).to_vec())
        .collect()
}

/// The site a stack belongs to: the innermost frame named (by `matches`) as one of `sites`.
pub fn site_of(
    profile: &Profile,
    frames: &[u64],
    sites: &[&str],
    matches: impl Fn(&str, &str) -> bool,
) -> Option<usize> {
    frames.iter().enumerate().find_map(|(i, &f)| {
        let names = frame_names(profile, i, f);
        sites
            .iter()
            .position(|site| names.iter().any(|n| matches(n, site)))
    })
}

/// In-use estimate per site (summed over the site's stacks).
pub fn per_site(
    profile: &Profile,
    sites: &[&str],
    matches: impl Fn(&str, &str) -> bool,
) -> Vec<Estimate> {
    let mut out = vec![Estimate::default(); sites.len()];
    for stack in &profile.stacks {
        if let Some(site) = site_of(profile, &stack.frames, sites, &matches) {
            out[site].add(&stack.counts.inuse);
        }
    }
    out
}

/// The `truth <site> <bytes>` lines a test program printed.
pub fn truths(stdout: &[u8]) -> BTreeMap<String, f64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.strip_prefix("truth ")?.split_whitespace();
            let site = fields.next()?.to_string();
            let bytes = fields.next()?.parse().ok()?;
            Some((site, bytes))
        })
        .collect()
}

/// The value of the dump's `# key: value` annotation.
pub fn annotation<'p>(profile: &'p Profile, key: &str) -> Option<&'p str> {
    profile
        .annotations
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// One preloaded run's per-site estimates and the truths the program measured, in the same order.
pub struct SiteRun {
    /// The run's settings, for messages.
    pub label: String,
    /// In-use estimate per site.
    pub estimates: Vec<Estimate>,
    /// Live bytes per site, as the program measured them.
    pub truths: Vec<f64>,
}

/// Checks the estimates of several runs (different seeds) against the truths: a site that kept
/// nothing has no estimate at all (its samples were removed at their frees); every other site has
/// samples; at most 17% of the 95% intervals miss their truth (a correct estimator misses 5%; with
/// 30 to 60 intervals, 17% is a 1-in-100 event or rarer); and per site the estimates summed over
/// the runs lie within 3.3 standard deviations of the summed truths (a 0.1% event per site).
pub fn check_estimates(sites: &[&str], runs: &[SiteRun]) {
    let mut report = String::new();
    let (mut misses, mut intervals) = (0, 0);
    let mut summed = vec![Estimate::default(); sites.len()];
    let mut summed_truth = vec![0.0; sites.len()];
    for run in runs {
        for (i, site) in sites.iter().enumerate() {
            let (estimate, truth) = (&run.estimates[i], run.truths[i]);
            let (low, high) = estimate.bytes_interval_95();
            report += &format!(
                "{} {site}: truth {truth} estimate {:.0} [{low:.0}, {high:.0}]\n",
                run.label, estimate.bytes
            );
            if truth == 0.0 {
                continue;
            }
            intervals += 1;
            if !(low..=high).contains(&truth) {
                misses += 1;
            }
            summed[i].add(estimate);
            summed_truth[i] += truth;
        }
    }
    for run in runs {
        for (i, site) in sites.iter().enumerate() {
            if run.truths[i] == 0.0 {
                assert!(run.estimates[i].is_zero(), "{site} kept nothing:\n{report}");
            } else {
                assert!(
                    run.estimates[i].bytes > 0.0,
                    "{site} has no samples:\n{report}"
                );
            }
        }
    }
    assert!(
        misses * 100 <= intervals * 17,
        "{misses} of {intervals} intervals missed the truth:\n{report}"
    );
    // Shown with `--nocapture`: the figures against the truth.
    println!("{report}{misses} of {intervals} intervals missed the truth");
    for (i, site) in sites.iter().enumerate() {
        let deviation = (summed[i].bytes - summed_truth[i]).abs();
        assert!(
            deviation <= 3.3 * summed[i].bytes_variance.sqrt(),
            "{site}: summed estimate {:.0} against summed truth {:.0}:\n{report}",
            summed[i].bytes,
            summed_truth[i]
        );
    }
}

/// The real jeprof's `--text --show_bytes --inuse_space` report of `dump`, given no binary (it
/// reads the names from the dump's symbol section): its output, and its table parsed.
pub fn jeprof_inuse_text(dump: &Path) -> (String, jeprof_conformance::Text) {
    let output = jeprof_conformance::run(&[
        "--text",
        "--show_bytes",
        "--inuse_space",
        dump.to_str().expect("UTF-8 temp path"),
    ]);
    assert_eq!(output.status, 0, "jeprof failed: {}", output.stderr);
    let text = jeprof_conformance::parse_text(&output.stdout).expect("jeprof's --text table");
    (output.stdout, text)
}
