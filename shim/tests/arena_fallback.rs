//! When the default 64 GiB range cannot be reserved (here: an 8 GiB address-space limit, as
//! `ulimit -v` or valgrind impose), the sampled arena takes the largest power of two that can be
//! had, says once on stderr what it got, and samples as usual: profiling is never silently off.
//!
//! The limit must be in place before the first sample, so the test re-runs its own binary as a
//! child that starts with sampling off, lowers `RLIMIT_AS`, and only then turns sampling on.

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const CHILD: &str = "JEPROF_SHIM_TEST_CHILD";

fn child() {
    let limit = libc::rlimit {
        rlim_cur: 8 << 30,
        rlim_max: 8 << 30,
    };
    // SAFETY: setrlimit reads one rlimit struct we own.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    let blocks: Vec<Vec<u8>> = (0..2000).map(|i| vec![1u8; 64 + i]).collect();
    let stats = jeprof_shim::stats();
    // ~1.1 MB at R = 4 KiB: a few hundred samples, all recorded in the smaller arena.
    assert!(stats.samples_taken >= 100, "{stats:?}");
    assert_eq!(stats.dropped.total(), 0, "{stats:?}");
    let range = stats.arena_bytes_reserved;
    assert!((4 << 20..8 << 30).contains(&range), "{stats:?}");
    drop(blocks);
}

#[test]
fn the_default_arena_falls_back_to_what_the_address_space_allows_and_says_so_once() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let out = jeprof_conformance::target_command(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_default_arena_falls_back_to_what_the_address_space_allows_and_says_so_once",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("JEPROF_SHIM", "sample_rate:0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("jeprof-shim: could not reserve the default"))
        .collect();
    assert_eq!(reports.len(), 1, "{stderr}");
    assert!(reports[0].contains("MiB instead"), "{stderr}");
    assert!(!stderr.contains("cannot reserve"), "{stderr}");
}
