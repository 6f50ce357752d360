//! A dump of a program whose heap is not jemalloc's (`Profiled<System>`) says `allocator: other`
//! and carries none of jemalloc's figures, which would describe only the profiler's sampled arena.

use jeprof_shim::jeprof_dumpfmt::allocator::{AllocatorFigures, JEMALLOC_FIGURES};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<std::alloc::System> =
    jeprof_shim::Profiled::new(std::alloc::System);

#[test]
fn a_dump_over_the_system_allocator_says_other_and_has_no_jemalloc_figures() {
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    let blocks: Vec<Vec<u8>> = (0..4096).map(|i| vec![i as u8; 512]).collect();
    let profile = jeprof_shim::snapshot();
    let annotation = |key: &str| profile.annotations.iter().find(|(k, _)| k == key);
    assert_eq!(
        annotation("allocator").map(|(_, v)| v.as_str()),
        Some("other"),
        "{:?}",
        profile.annotations
    );
    for (key, _) in JEMALLOC_FIGURES {
        assert!(
            annotation(key).is_none(),
            "{key}: {:?}",
            profile.annotations
        );
    }
    let figures = AllocatorFigures::from_annotations(&profile.annotations).unwrap();
    assert_eq!(figures.jemalloc, None);
    // The profiler's own bytes and the process's RSS are known whatever the allocator.
    assert!(figures.profiler > 0);
    assert!(figures.rss_anon.is_some() && figures.rss_file.is_some());
    drop(blocks);
}
