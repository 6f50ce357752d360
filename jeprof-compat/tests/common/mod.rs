//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack, SymbolTable};

/// `fixtures/compat/` in the workspace.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/compat")
}

/// The workspace's Python (`$JEPROF_PYTHON`, else `target/pyenv/bin/python3`, where `.ci/run`
/// installs the PyPI packages the tests use), and whether `import MODULES` succeeds in it.
pub fn workspace_python(modules: &[&str]) -> (PathBuf, bool) {
    let python = std::env::var_os("JEPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/pyenv/bin/python3")
        });
    let imports = format!("import {}", modules.join(", "));
    let ok = python.is_file()
        && Command::new(&python)
            .args(["-c", &imports])
            .output()
            .is_ok_and(|o| o.status.success());
    (python, ok)
}

/// The real jemalloc dump in `shared/real-dumps/` (beside the project root), if present. CI has it;
/// under `CI=true` its absence is a failure.
pub fn real_dump() -> Option<PathBuf> {
    let found = find_real_dump();
    if found.is_none() {
        assert!(
            !jeprof_conformance::in_ci(),
            "shared/real-dumps/pprof-pr690-jemalloc.heap is missing under CI"
        );
        eprintln!("notice: shared/real-dumps/pprof-pr690-jemalloc.heap not found; skipping cases that read it");
    }
    found
}

/// Where the real dump is: `shared/real-dumps/` beside the checkout (where CI lays it), else in
/// the directory `JEPROF_REAL_DUMPS` names (for a worktree or clone elsewhere); `None` where
/// neither has it.
pub fn find_real_dump() -> Option<PathBuf> {
    const NAME: &str = "pprof-pr690-jemalloc.heap";
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/real-dumps");
    let named = std::env::var_os("JEPROF_REAL_DUMPS").map(PathBuf::from);
    [Some(beside), named]
        .into_iter()
        .flatten()
        .map(|dir| dir.join(NAME))
        .find(|p| p.is_file())
}

/// Runs the built `jeprof-compat` binary.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(args)
        .output()
        .expect("the jeprof-compat binary runs")
}

/// Runs it and returns stdout, failing the test on a non-zero exit.
pub fn run_ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "jeprof-compat {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// A symbolized profile of the given stacks over a small set of functions (`frames` are function
/// numbers, leaf first; each stack's in-use and allocated figures are `objects`/`bytes`, with
/// variances 2·objects and 3·bytes), at an address base: different bases stand for different
/// builds.
pub fn generated_profile(stacks: &[(Vec<u8>, f64, f64)], period: u64, base: u64) -> Profile {
    let mut p = Profile::new(period);
    let mut names = BTreeMap::new();
    for (frames, objects, bytes) in stacks {
        let addrs: Vec<u64> = frames.iter().map(|&f| base + 0x100 * f as u64).collect();
        for (i, &a) in addrs.iter().enumerate() {
            names.insert(
                if i == 0 { a } else { a - 1 },
                vec![format!("fn_{}", (addrs[i] - base) >> 8)],
            );
        }
        let e = Estimate {
            objects: *objects,
            bytes: *bytes,
            objects_variance: objects * 2.0,
            bytes_variance: bytes * 3.0,
        };
        p.stacks.push(Stack {
            frames: addrs,
            counts: Counts { inuse: e, accum: e },
            threads: Vec::new(),
        });
    }
    p.symbols = Some(SymbolTable {
        binary: None,
        names,
        ..SymbolTable::default()
    });
    p
}

/// `pie.heap` moved to another base address, as another process of the same build would be.
pub fn relocated_pie(shift: u64) -> String {
    let text = std::fs::read_to_string(fixtures().join("pie.heap")).unwrap();
    let re = regex::Regex::new(r"(0x)?(5555555[0-9a-f]{5})").unwrap();
    re.replace_all(&text, |c: &regex::Captures| {
        let v = u64::from_str_radix(&c[2], 16).unwrap() + shift;
        format!("{}{v:x}", c.get(1).map_or("", |m| m.as_str()))
    })
    .into_owned()
}

/// One process's series of twelve hourly dumps: `fn_1` leaks 2,000 objects of 1 KiB an hour,
/// `fn_3` holds 5,000 of 512 B throughout, `fn_4` fills 3,000 of 256 B an hour and empties every
/// third hour; each with the variance of its sampled estimate at 512 KiB. Labelled `service=api`
/// and `pid`, an hour apart from 2026-11-24T08:00Z.
pub fn leaking_series(dir: &std::path::Path, pid: &str) -> Vec<PathBuf> {
    let period = 524_288u64;
    let estimate = |objects: f64, size: f64| {
        let (objects_variance, bytes_variance) =
            jeprof_dumpfmt::math::variance_from_average(objects, objects * size, period as f64);
        Estimate {
            objects,
            bytes: objects * size,
            objects_variance,
            bytes_variance,
        }
    };
    (0..12u64)
        .map(|hour| {
            let mut profile = generated_profile(
                &[
                    (vec![1, 9], 1.0, 1.0),
                    (vec![3, 9], 1.0, 1.0),
                    (vec![4, 9], 1.0, 1.0),
                ],
                period,
                0x40_0000,
            );
            let leak = 2000.0 * (hour + 1) as f64;
            let fills = hour + 1 - (hour + 1) / 3;
            let cached = 3000.0 * (hour % 3) as f64;
            let counts = [
                (estimate(leak, 1024.0), estimate(leak, 1024.0)),
                (estimate(5000.0, 512.0), estimate(5000.0, 512.0)),
                (
                    estimate(cached, 256.0),
                    estimate(3000.0 * fills as f64, 256.0),
                ),
            ];
            for (stack, (inuse, accum)) in profile.stacks.iter_mut().zip(counts) {
                stack.counts = Counts { inuse, accum };
            }
            profile.stacks.retain(|s| !s.counts.is_zero());
            let moment =
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_507_200 + 3600 * hour);
            profile.labels = vec![
                ("service".into(), "api".into()),
                ("pid".into(), pid.into()),
                ("time".into(), jeprof_dumpfmt::labels::rfc3339_utc(moment)),
            ];
            let path = dir.join(format!("series-{pid}-{hour:02}.heap"));
            jeprof_dumpfmt::write::write_file(&profile, &path, &Default::default()).unwrap();
            path
        })
        .collect()
}
