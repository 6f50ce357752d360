//! `max_dumps` keeps a process's newest sequenced dumps and removes only files it wrote itself; a
//! forked child gets a writer of its own, writes under its own pid, and does not prune its
//! parent's dumps.

use std::hint::black_box;
use std::path::Path;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// File names in `dir`, sorted, without the temporary files of dumps being written.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

#[test]
fn max_dumps_prunes_the_processs_own_oldest_dumps_and_a_forked_child_writes_its_own() {
    let dir = tempfile::tempdir().unwrap();
    // A file that looks like an old dump of this process but was not written by it: kept.
    let pid = std::process::id();
    let foreign = format!("app.{pid}.99.m99.heap");
    std::fs::write(dir.path().join(&foreign), b"not ours").unwrap();
    jeprof_shim::configure(&format!(
        "dump_prefix:{}/app,max_dumps:3,symbolize:false",
        dir.path().display()
    ))
    .unwrap();
    let written: Vec<String> = (0..5)
        .map(|_| {
            let path = jeprof_shim::dump_next().unwrap();
            path.file_name().unwrap().to_str().unwrap().to_string()
        })
        .collect();
    let want: Vec<String> = (0..5).map(|i| format!("app.{pid}.{i}.m{i}.heap")).collect();
    assert_eq!(written, want);
    let mut kept = vec![foreign.clone()];
    kept.extend(want[2..].iter().cloned());
    kept.sort();
    assert_eq!(
        names(dir.path()),
        kept,
        "the three newest and the foreign file"
    );

    // Interval dumps every 1 MiB of estimated allocation, from a writer started by configure.
    jeprof_shim::configure("sample_rate:4096,dump_interval:1048576").unwrap();
    // SAFETY: the child only allocates, reads a directory, sleeps and leaves with _exit; the
    // profiler's fork handlers leave its locks usable in the child.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let me = std::process::id();
        let mut ok = false;
        for _ in 0..600 {
            let blocks: Vec<Vec<u8>> = (0..256).map(|i| vec![1u8; 4096 + i]).collect();
            black_box(&blocks);
            drop(blocks);
            let here = names(dir.path());
            if here
                .iter()
                .any(|n| n.starts_with(&format!("app.{me}.")) && n.contains(".i"))
            {
                // Its own dumps do not prune the parent's (max_dumps counts the child's files).
                ok = kept.iter().all(|k| here.contains(k));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: ends the child at once, without the parent's exit handlers or test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child we forked; status is a local.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}: no interval dump of its own, or the parent's dumps were pruned: {:?}",
        names(dir.path())
    );
    let child_dumps = names(dir.path())
        .into_iter()
        .filter(|n| n.starts_with(&format!("app.{child}.")))
        .count();
    assert!(child_dumps >= 1);
    println!("{:?}", names(dir.path()));
}
