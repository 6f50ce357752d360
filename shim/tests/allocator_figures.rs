//! The allocator's figures in a dump of a program whose heap is `Profiled<Jemalloc>`: jemalloc's
//! own order holds between them, the program's heap they imply lies inside the profile's
//! interval, and the real jeprof reads the dump exactly as it reads it without them.
//!
//! One test: the figures describe the whole process, so nothing else may allocate meanwhile.

use jeprof_shim::jeprof_dumpfmt::allocator::AllocatorFigures;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// 64 MiB in 16,384 blocks of 4 KiB, a jemalloc size class, so that jemalloc's `allocated`
/// counts exactly what the program asked for.
const BLOCK: usize = 4096;
const BLOCKS: usize = 16 << 10;

/// jemalloc's figure of all arenas merged (`stats.arenas.<MALLCTL_ARENAS_ALL>.<name>`), as of the
/// last epoch.
fn all_arenas(name: &str) -> u64 {
    let key = format!("stats.arenas.4096.{name}\0");
    // SAFETY: the name is NUL-terminated and names a size_t statistic.
    unsafe { tikv_jemalloc_ctl::raw::read::<usize>(key.as_bytes()) }.unwrap() as u64
}

#[test]
fn figures_keep_jemallocs_order_and_the_program_heap_they_imply_lies_in_the_profile_interval() {
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    jeprof_shim::reseed(11);
    let mut blocks: Vec<Box<[u8]>> = Vec::with_capacity(BLOCKS);
    for i in 0..BLOCKS {
        blocks.push(vec![i as u8; BLOCK].into_boxed_slice());
    }

    let profile = jeprof_shim::snapshot();
    let figures = AllocatorFigures::from_annotations(&profile.annotations)
        .unwrap_or_else(|e| panic!("{e}: {:?}", profile.annotations));
    let annotation = |key: &str| {
        profile
            .annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(annotation("allocator"), Some("jemalloc"));
    let j = figures.jemalloc.expect("jemalloc figures");

    // jemalloc's documented relations (stats.active, stats.resident, stats.mapped in its manual):
    // active ≥ allocated, resident ≥ active, mapped ≥ active. Its manual says mapped has no
    // strict order with resident (dirty pages of extents not in use count in resident only), so
    // that one is not asserted.
    assert!(j.allocated <= j.active, "{j:?}");
    assert!(j.active <= j.resident, "{j:?}");
    assert!(j.active <= j.mapped, "{j:?}");
    assert!(j.allocated >= (BLOCK * BLOCKS) as u64, "{j:?}");
    assert!(figures
        .rss_anon
        .is_some_and(|anon| anon >= (BLOCK * BLOCKS) as u64));

    // jemalloc's `allocated` holds, besides the program's blocks: the profiler's own (its tables,
    // allocated through `Profiled`'s inner allocator outside sampling, and the sampled arena's
    // pinned and cached objects: `profiler_bytes`), jemalloc's internal blocks (thread caches'
    // own structures, also counted in `metadata`), and blocks freed into thread caches. The two
    // last are jemalloc's, read here as of the dump's epoch (nothing allocated since).
    let internal = all_arenas("internal");
    let cached = all_arenas("tcache_bytes");
    let program = j.allocated - figures.profiler - internal - cached;
    let inuse = profile.totals().inuse;
    let (lo, hi) = inuse.bytes_interval_95();
    eprintln!(
        "allocated {} profiler {} internal {internal} cached {cached} program {program}; \
         profile {:.0} (95%: {lo:.0} to {hi:.0})",
        j.allocated, figures.profiler, inuse.bytes
    );
    assert!(
        (lo..=hi).contains(&(program as f64)),
        "the program's heap by jemalloc, {program}, is outside the profile's interval \
         {lo:.0} to {hi:.0} ({j:?}, profiler {})",
        figures.profiler
    );
    // The profiler's share is small but not nothing: its live-sample store alone holds about
    // 16,000 samples at this rate.
    assert!(figures.profiler > 0 && figures.profiler < j.allocated / 10);

    jeprof_reads_the_dump_as_without_the_figures();
    drop(blocks);
}

/// The real jeprof prints the same report for the dump with its allocator annotations and with
/// them removed: they are comments to it.
fn jeprof_reads_the_dump_as_without_the_figures() {
    // Symbols in the dump, so jeprof needs no binary.
    jeprof_shim::configure("symbolize:true").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let with = dir.path().join("with.heap");
    jeprof_shim::dump(&with).unwrap();
    let text = std::fs::read_to_string(&with).unwrap();
    let keys = [
        "allocator",
        "profiler_bytes",
        "process_rss_anon",
        "process_rss_file",
    ];
    let stripped: String = text
        .lines()
        .filter(|line| !keys.iter().any(|k| line.starts_with(&format!("# {k}"))))
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(
        stripped.len() < text.len(),
        "no allocator lines in the dump"
    );
    let without = dir.path().join("without.heap");
    std::fs::write(&without, stripped).unwrap();
    let report = |dump: &std::path::Path| {
        let out = jeprof_conformance::run(&["--text", "--inuse_space", dump.to_str().unwrap()]);
        assert_eq!(out.status, 0, "jeprof failed: {}", out.stderr);
        out.stdout
    };
    assert_eq!(report(&with), report(&without));
}
