//! When the sampled arena's reserved range is exhausted, samples fall back to the inner allocator
//! (the memory works), the drops are counted in `stats()` and in the dump, and the arena keeps
//! serving once space is freed. Also: `JEPROF_SHIM` is read at first use, a bad key is reported on
//! stderr while the good keys apply, and `dump_on_exit` writes a dump when the process exits.
//!
//! The settings must be in the environment before the first allocation, so the test re-runs its
//! own binary as a child with `JEPROF_SHIM` set.

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const ARENA: u64 = 16 << 20;
const CHILD: &str = "JEPROF_SHIM_TEST_CHILD";

fn child() {
    let stats = jeprof_shim::stats();
    assert_eq!(
        stats.sample_rate, 4096,
        "JEPROF_SHIM applied despite the bad key"
    );
    let baseline = stats.live_samples;

    // 1 MiB blocks are sampled with probability 1 − e^(−256) = 1: 40 of them need 40 MiB, the
    // range has 16 MiB (part of it for jemalloc's metadata).
    let mut blocks: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1 << 20]).collect();
    let stats = jeprof_shim::stats();
    assert_eq!(stats.arena_bytes_reserved, ARENA);
    assert!(stats.dropped.arena_exhausted > 0, "{stats:?}");
    assert!(stats.samples_taken > 0, "{stats:?}");
    for (i, b) in blocks.iter_mut().enumerate() {
        assert!(
            b.iter().all(|&x| x == i as u8),
            "block {i} lost its contents"
        );
        b.fill(0xAB);
    }
    let profile = jeprof_shim::snapshot();
    let noted = profile
        .annotations
        .iter()
        .find(|(k, _)| k == "shim_samples_dropped_arena_exhausted")
        .map(|(_, v)| v.parse::<u64>().unwrap());
    assert_eq!(noted, Some(stats.dropped.arena_exhausted));
    let mut text = Vec::new();
    jeprof_shim::dump_to(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains(&format!(
            "# shim_samples_dropped_arena_exhausted: {}",
            stats.dropped.arena_exhausted
        )),
        "{}",
        &text[..text.len().min(2000)]
    );

    drop(blocks);
    assert_eq!(jeprof_shim::stats().live_samples, baseline);

    // Freed space is reused: small samples are served again without new drops.
    let before = jeprof_shim::stats();
    let small: Vec<Vec<u8>> = (0..200).map(|_| vec![7u8; 4096]).collect();
    let after = jeprof_shim::stats();
    assert!(after.samples_taken > before.samples_taken + 50, "{after:?}");
    assert_eq!(
        after.dropped.arena_exhausted,
        before.dropped.arena_exhausted
    );
    drop(small);
    // Returning from main runs exit handlers: dump_on_exit writes the dump.
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let dir = std::env::temp_dir().join(format!("jeprof-shim-exhaust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let at_exit = dir.join("exit.prof");
    let output = jeprof_conformance::target_command(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .env(
            "JEPROF_SHIM",
            format!(
                "sample_rate:4096,arena_size:{ARENA},bogus_key:1,symbolize:false,dump_on_exit:{}",
                at_exit.display()
            ),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed: {stderr}");
    assert!(
        stderr.contains("bogus_key") && stderr.contains("unknown key"),
        "no error about the bad key on stderr: {stderr}"
    );
    let text = std::fs::read(&at_exit).expect("dump_on_exit wrote a dump");
    let profile = jeprof_shim::jeprof_dumpfmt::read::parse(&text).unwrap();
    assert_eq!(profile.sample_period, 4096);
    std::fs::remove_dir_all(&dir).ok();
}
