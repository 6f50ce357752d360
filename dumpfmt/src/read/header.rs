//! The front of a dump, up to and including its header `heap_v2/<R>`: `%` lines (skipped), an
//! optional symbol section, `--- heap`; and telling input that is not a heap_v2 dump from a
//! malformed one.

use std::io::BufRead;
use std::sync::OnceLock;

use regex::Regex;

use super::classify::is_marker;
use super::errors::{malformed, not_heap};
use super::lines::Lines;
use super::symbols::read_symbols;
use crate::error::Error;
use crate::model::Profile;
use crate::syntax;

/// `heap_v2/<R>` with blanks after it, as jeprof matches it.
fn header_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        let prefix = format!("{}{}", syntax::FORMAT, syntax::PERIOD_SEPARATOR);
        Regex::new(&format!(r"^{}(\d+)\s*$", regex::escape(&prefix))).expect("static regex")
    })
}

/// What the first line of a dump is.
enum First {
    Symbols,
    HeapMarker,
    Header(Result<u64, Error>),
}

/// Reads the dump up to its header: the symbol section into `profile.symbols`, and the header's
/// period, which is returned.
pub(super) fn read_front(
    lines: &mut Lines<impl BufRead>,
    profile: &mut Profile,
) -> Result<u64, Error> {
    let first = match lines.next_skipping_percent()? {
        None => return Err(not_heap("the input is empty")),
        Some((_, line)) if is_marker(line, syntax::SYMBOL) => First::Symbols,
        Some((_, line)) if is_marker(line, syntax::HEAP) => First::HeapMarker,
        Some((no, line)) => First::Header(read_header(no, line)),
    };
    match first {
        First::Header(header) => header,
        First::HeapMarker => header_after_markers(lines, false),
        First::Symbols => {
            profile.symbols = Some(read_symbols(lines)?);
            header_after_markers(lines, true)
        }
    }
}

/// The header after `--- symbol … ---` (`symbolized`) or `--- heap`: after the symbol section, an
/// optional `--- heap`/`--- growth` first. A symbolized dump whose header is wrong is malformed,
/// not another format.
fn header_after_markers(lines: &mut Lines<impl BufRead>, symbolized: bool) -> Result<u64, Error> {
    let mut next = lines.next_skipping_percent()?;
    if symbolized {
        if let Some((_, l)) = next {
            if is_marker(l, syntax::HEAP) || is_marker(l, syntax::GROWTH) {
                next = lines.next_skipping_percent()?;
            }
        }
    }
    let Some((no, line)) = next else {
        return Err(not_heap("no heap_v2 header after the symbol section"));
    };
    if symbolized && is_marker(line, syntax::SYMBOL) {
        return Err(malformed(
            no,
            line,
            "one `--- symbol` section only (a second `--- symbol` starts here)",
        ));
    }
    match read_header(no, line) {
        Err(Error::NotHeapV2 { .. }) if symbolized => Err(malformed(
            no,
            line,
            "the header `heap_v2/<sample period>` after the symbol section",
        )),
        other => other,
    }
}

/// The period of the header `heap_v2/<R>`; what the input is instead when it is not one.
fn read_header(line_number: usize, line: &[u8]) -> Result<u64, Error> {
    let text = std::str::from_utf8(line).unwrap_or("");
    if let Some(c) = header_regex().captures(text) {
        return c[1].parse::<u64>().map_err(|_| {
            malformed(
                line_number,
                line,
                "a sample period that fits in 64 bits after `heap_v2/`",
            )
        });
    }
    if line.starts_with(syntax::FORMAT.as_bytes()) {
        return Err(malformed(
            line_number,
            line,
            "the header `heap_v2/<sample period>`",
        ));
    }
    Err(not_heap(&not_a_header(line)))
}

/// What a first line that is no heap_v2 header says the input is.
fn not_a_header(line: &[u8]) -> String {
    let start = || String::from_utf8_lossy(&line[..line.len().min(80)]);
    if line.starts_with(syntax::LEGACY_HEADER.as_bytes()) {
        "a gperftools (legacy) heap profile, not jemalloc's heap_v2".to_string()
    } else if line.starts_with(b"heap") {
        // Another heap profile's header (`heap_v1/…`, `heap_v2:…`).
        format!(
            "header {:?}; only `heap_v2/<period>` is understood",
            start()
        )
    } else if line.iter().any(|&b| b == 0 || (b < 0x20 && b != b'\t')) {
        "binary data (a CPU profile or another binary file?)".to_string()
    } else {
        format!(
            "first line {:?} is not a `heap_v2/<period>` header",
            start()
        )
    }
}
