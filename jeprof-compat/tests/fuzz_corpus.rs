//! Replays the fuzz corpus (`fuzz/corpus/read/`, plus every fixture in `fixtures/compat/`) through
//! the fuzz target's body on stable Rust: nothing may panic, and truncating any input at any line
//! must not panic either.

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
            let result = std::panic::catch_unwind(|| jeprof_compat::fuzzing::exercise(prefix));
            assert!(
                result.is_ok(),
                "panic on {} cut at byte {cut}",
                path.display()
            );
        }
    }
}
