//! `dump(path)` from two threads at once, with a reader of `path` beside them (what automatic
//! dumps next to a program's own calls do): every call succeeds and the path always holds one
//! complete dump, never an empty or cut one. A planted symlink at the path is replaced, not
//! followed.

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

#[test]
fn concurrent_dumps_to_one_path_all_succeed_and_readers_only_see_whole_dumps() {
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    let kept: Vec<Vec<u8>> = (0..2000).map(|i| vec![1u8; 64 + i]).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("heap.prof");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();

    let done = AtomicBool::new(false);
    let (errors, reads) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let path = &path;
                s.spawn(move || {
                    (0..1000)
                        .filter(|_| jeprof_shim::dump(path).is_err())
                        .count()
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut reads = 0usize;
            while !done.load(Ordering::Relaxed) {
                // Before the first dump lands the path is still the planted link.
                if std::fs::symlink_metadata(&path)
                    .unwrap()
                    .file_type()
                    .is_symlink()
                {
                    continue;
                }
                let profile = jeprof_dumpfmt::read::read_file(&path).expect("one whole dump");
                assert!(!profile.stacks.is_empty());
                reads += 1;
            }
            reads
        });
        let errors: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, Ordering::Relaxed);
        (errors, reader.join().unwrap())
    });
    assert_eq!(errors, 0, "every dump succeeds");
    assert!(reads > 0, "the reader read dumps");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "no temporary file left behind");
    drop(kept);
}
