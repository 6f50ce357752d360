//! A sampled arena that cannot be created (here: an address-space limit, as `ulimit -v` or
//! valgrind impose) is said once on stderr, with what to do about it; the program runs on and the
//! dropped samples are counted. Profiling is never silently off.
//!
//! The limit must be in place before the first sample, so the test re-runs its own binary as a
//! child that starts with sampling off, lowers `RLIMIT_AS`, and only then turns sampling on.

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const CHILD: &str = "JEPROF_SHIM_TEST_CHILD";

fn child() {
    // 8 GiB of address space: plenty for this program, far from the 16 GiB arena it asks for
    // (reserved twice over, for alignment).
    let limit = libc::rlimit {
        rlim_cur: 8 << 30,
        rlim_max: 8 << 30,
    };
    // SAFETY: setrlimit reads one rlimit struct we own.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
    // An explicit size is taken as asked or not at all (the default one would fall back to a
    // smaller range: tests/arena_fallback.rs).
    jeprof_shim::configure("sample_rate:4096,symbolize:false,arena_size:17179869184").unwrap();
    let blocks: Vec<Vec<u8>> = (0..2000).map(|i| vec![1u8; 64 + i]).collect();
    let stats = jeprof_shim::stats();
    // Every sample was dropped and counted (samples_taken counts recorded ones only).
    assert!(stats.dropped.arena_unavailable > 0, "{stats:?}");
    assert_eq!(stats.samples_taken, 0, "{stats:?}");
    assert_eq!(
        blocks.iter().map(Vec::len).sum::<usize>(),
        2000 * 64 + 1999 * 1000
    );
}

#[test]
fn an_arena_that_cannot_be_created_is_reported_once_and_the_program_runs_on() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let out = jeprof_conformance::target_command(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_arena_that_cannot_be_created_is_reported_once_and_the_program_runs_on",
            "--nocapture",
        ])
        .env(CHILD, "1")
        // Nothing is sampled until the child has lowered its limit: a sample taken earlier (the
        // test harness's own threads allocate too) would create the arena before the limit.
        .env("JEPROF_SHIM", "sample_rate:0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let reports = stderr
        .lines()
        .filter(|l| l.starts_with("jeprof-shim: cannot reserve"))
        .count();
    assert_eq!(reports, 1, "{stderr}");
    assert!(stderr.contains("arena_size"), "{stderr}");
}
