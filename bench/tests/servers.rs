//! The server harness end to end on a small configuration, so that it cannot rot: Debian's
//! `redis-server` under `redis-benchmark` with plain jemalloc and with our preload library
//! (`apt-get install redis-server redis-tools libjemalloc2`; the library is the one `cargo test
//! --workspace` builds, or a release build, or the one `JEPROF_PRELOAD` names).

use std::path::{Path, PathBuf};
use std::time::Duration;

use jeprof_bench::servers::{run_once, Load, ServerKind, Settings, Variant};

/// Our library: `JEPROF_PRELOAD`; else the one cargo built beside this test binary (in
/// `<target>/<profile>/deps/`, where `cargo test --workspace` leaves jeprof-preload's cdylib); else
/// the release build; else the debug build.
fn preload() -> PathBuf {
    if let Some(p) = std::env::var_os("JEPROF_PRELOAD") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let beside = exe.parent().map(|deps| deps.join("libjeprof_preload.so"));
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let release = target.join("release/libjeprof_preload.so");
    let found = beside
        .into_iter()
        .chain([release.clone(), target.join("debug/libjeprof_preload.so")])
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "{} is missing: build it with `cargo build --release -p jeprof-preload` (or set JEPROF_PRELOAD)",
            release.display()
        )
    })
}

/// A load of seconds: 2,000 requests per redis-benchmark test.
fn small() -> Settings {
    Settings {
        redis_requests: 2_000,
        ..Settings::debian(preload())
    }
}

#[test]
fn redis_answers_the_benchmark_under_plain_jemalloc_and_under_ours_which_names_its_allocation_sites(
) {
    let dir = tempfile::tempdir().unwrap();
    let settings = small();
    let plain = run_once(
        ServerKind::Redis,
        Variant::Jemalloc,
        &settings,
        dir.path(),
        &Load::Table,
    )
    .unwrap_or_else(|e| panic!("plain jemalloc: {e}"));
    let ours = run_once(
        ServerKind::Redis,
        Variant::Ours,
        &settings,
        dir.path(),
        &Load::Table,
    )
    .unwrap_or_else(|e| panic!("ours: {e}"));
    for (label, run) in [("plain", &plain), ("ours", &ours)] {
        let names: Vec<&str> = run.tests.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.contains(&"SET") && names.contains(&"GET"),
            "{label}: tests {names:?}"
        );
        assert!(
            run.throughput() > 0.0 && run.server_cpu > 0.0,
            "{label}: {run:?}"
        );
    }
    assert_eq!(plain.profile, None, "plain jemalloc writes no profile");
    // Sampling at 512 KiB over a few MiB of live keys may miss a given site, so sample every
    // 4 KiB here: redis's own wrappers (zmalloc, sdsnewlen, exported for modules) must be named.
    let dense = Settings {
        rate: 4096,
        ..settings
    };
    let ours = run_once(
        ServerKind::Redis,
        Variant::Ours,
        &dense,
        dir.path(),
        &Load::Table,
    )
    .unwrap_or_else(|e| panic!("ours at 4 KiB: {e}"));
    let dump = ours.profile.expect("ours writes a dump at exit");
    let profile = jeprof_dumpfmt::read::read_file(&dump).unwrap();
    assert!(!profile.stacks.is_empty(), "{}: no samples", dump.display());
    let names: Vec<&String> = profile
        .symbols
        .as_ref()
        .expect("our dumps carry their symbols")
        .names
        .values()
        .flatten()
        .collect();
    for site in ["zmalloc", "sdsnewlen"] {
        assert!(
            names.iter().any(|n| n.contains(site)),
            "{}: no frame names {site}",
            dump.display()
        );
    }
}

#[test]
fn a_server_that_never_answers_fails_its_run() {
    let dir = tempfile::tempdir().unwrap();
    // A "redis-server" that runs but never listens.
    let fake = dir.path().join("silent-server");
    std::fs::write(&fake, "#!/bin/sh\nexec sleep 30\n").unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let settings = Settings {
        redis_server: fake,
        startup_limit: Duration::from_secs(2),
        ..small()
    };
    let err = run_once(
        ServerKind::Redis,
        Variant::Jemalloc,
        &settings,
        dir.path(),
        &Load::Table,
    )
    .unwrap_err();
    assert!(err.contains("did not answer"), "{err}");
}
