//! Replays the fuzz corpora on stable Rust through the fuzz targets' bodies
//! (`jeprof_compat::fuzzing`): `fuzz/corpus/read/` and every fixture in `fixtures/compat/` through
//! the reader and everything after it, and through the streaming reader, cut at every line and once
//! mid-line; `fuzz/corpus/pprof/` (and the same files) through the pprof writer. Nothing may panic.

use std::path::PathBuf;

fn inputs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        root.join("fuzz/corpus/read"),
        root.join("fuzz/artifacts/read"),
        root.join("../fixtures/compat"),
    ] {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let p = e.path();
                let is_fixture_dir = dir.ends_with("compat");
                if p.is_file() && (!is_fixture_dir || p.extension().is_some_and(|x| x == "heap")) {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_corpus_file_and_every_truncation_runs_without_panic() {
    let files = inputs();
    assert!(files.len() >= 20, "corpus too small: {files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| jeprof_compat::fuzzing::exercise(&bytes));
        assert!(result.is_ok(), "panic on {}", path.display());
        let result = std::panic::catch_unwind(|| jeprof_compat::fuzzing::exercise_stream(&bytes));
        assert!(result.is_ok(), "streaming disagrees on {}", path.display());
        // Every prefix ending at a line break, and one cut mid-line.
        let cuts: Vec<usize> = bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i)
            .chain([bytes.len() / 2])
            .collect();
        for cut in cuts {
            let prefix = &bytes[..cut];
            let result = std::panic::catch_unwind(|| {
                jeprof_compat::fuzzing::exercise(prefix);
                jeprof_compat::fuzzing::exercise_stream(prefix);
            });
            assert!(
                result.is_ok(),
                "panic on {} cut at byte {cut}",
                path.display()
            );
        }
    }
}

#[test]
fn every_pprof_corpus_file_writes_a_self_consistent_profile() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/pprof");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.extend(inputs());
    assert!(files.len() >= 30, "corpus too small: {files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| jeprof_compat::fuzzing::exercise_pprof(&bytes));
        assert!(result.is_ok(), "panic on {}", path.display());
    }
}
