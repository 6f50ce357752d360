//! `go tool pprof` as the listener's tests run it: `-top` over a URL, and the figures read back
//! from its table.
#![allow(dead_code)]

use std::path::Path;

/// `go tool pprof -top` over `url`, with `sample_index`; returns stdout.
pub fn go_top(go: &Path, url: &str, sample_index: &str, scratch: &Path) -> String {
    let index = format!("-sample_index={sample_index}");
    jeprof_conformance::go_pprof(
        go,
        scratch,
        &["-top", "-unit=B", "-nodecount=1000", &index, url],
    )
}

/// The total of `-top`'s "Showing nodes accounting for X, Y% of TOTAL total" line, in bytes.
pub fn total(top: &str) -> f64 {
    let line = top
        .lines()
        .find(|l| l.contains(" total"))
        .unwrap_or_else(|| panic!("no total in:\n{top}"));
    let word = line
        .split_whitespace()
        .rev()
        .nth(1)
        .unwrap_or_else(|| panic!("no total in {line:?}"));
    bytes(word).unwrap_or_else(|| panic!("bad total in {line:?}"))
}

/// `1234B` → 1234.
pub fn bytes(word: &str) -> Option<f64> {
    word.strip_suffix('B')?.parse().ok()
}

/// The cumulative bytes of the row whose function ends with `::<name>`, if printed.
pub fn cum_of(top: &str, name: &str) -> Option<f64> {
    let suffix = format!("::{name}");
    top.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() >= 6 && fields[5..].join(" ").ends_with(&suffix))
            .then(|| bytes(fields[3]))
            .flatten()
    })
}
