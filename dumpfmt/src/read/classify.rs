//! What a line is: a section marker, or which kind of body line, told by its first bytes as jeprof
//! tells them ([`crate::syntax`]).

use crate::syntax;

/// A line of the body, by its start.
pub(super) enum BodyLine<'a> {
    /// [`syntax::MAPPED_LIBRARIES`] or [`syntax::LEGACY_MEMORY_MAP`] at the very start of the
    /// line: the memory map follows, to the end of the dump.
    MemoryMap,
    /// Nothing but blanks.
    Blank,
    /// A stack line: what follows [`syntax::STACK`] (the line trimmed).
    Stack(&'a [u8]),
    /// A comment line, trimmed; it starts with [`syntax::COMMENT`].
    Comment(&'a [u8]),
    /// A counts line, trimmed; it starts with [`syntax::COUNTS`].
    Counts(&'a [u8]),
    /// None of these.
    Other,
}

const STACK: u8 = syntax::STACK as u8;
const COMMENT: u8 = syntax::COMMENT as u8;
const COUNTS: u8 = syntax::COUNTS as u8;

/// Which kind of body line `raw` is. The memory map's start is matched on the line as it is, every
/// other kind on the line without the blanks at either end.
pub(super) fn classify(raw: &[u8]) -> BodyLine<'_> {
    if raw.starts_with(syntax::MAPPED_LIBRARIES.as_bytes())
        || raw.starts_with(syntax::LEGACY_MEMORY_MAP.as_bytes())
    {
        return BodyLine::MemoryMap;
    }
    let line = trim(raw);
    match line.first() {
        None => BodyLine::Blank,
        Some(&STACK) => BodyLine::Stack(&line[1..]),
        Some(&COMMENT) => BodyLine::Comment(line),
        Some(&COUNTS) => BodyLine::Counts(line),
        Some(_) => BodyLine::Other,
    }
}

/// `--- <name>` as jeprof matches it: `^--- *<name>`.
pub(super) fn is_marker(line: &[u8], name: &str) -> bool {
    let Some(rest) = line.strip_prefix(syntax::MARKER.as_bytes()) else {
        return false;
    };
    let rest = trim_start(rest);
    rest.starts_with(name.as_bytes())
}

/// What follows `word` and one space at the start of `text`: how a comment's word is matched
/// once the comment sign and the blanks after it are gone.
pub(super) fn after_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    text.strip_prefix(word)?.strip_prefix(' ')
}

/// [`after_word`] on bytes.
pub(super) fn after_word_bytes<'a>(text: &'a [u8], word: &str) -> Option<&'a [u8]> {
    text.strip_prefix(word.as_bytes())?.strip_prefix(b" ")
}

/// `line` without ASCII whitespace at either end.
pub(super) fn trim(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &line[start..end]
}

/// `line` without ASCII whitespace at its start.
pub(super) fn trim_start(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[start..]
}
