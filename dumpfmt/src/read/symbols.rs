//! The symbol section, `--- symbol` … `---`: names per address (jeprof's `ReadSymbols`), and the
//! source positions this crate's writer adds as `# line` comments.

use std::io::BufRead;

use super::classify::{after_word, is_marker};
use super::errors::{malformed, not_heap};
use super::lines::Lines;
use super::stack::parse_hex;
use crate::error::Error;
use crate::model::{SourceLine, SymbolTable};
use crate::syntax;

/// A `# line` position as written: the address, the position in its `--` list, the line.
type Position = (u64, usize, SourceLine);

/// Reads the symbol section after its `--- symbol` line, up to and including the `---` that
/// closes it.
pub(super) fn read_symbols(lines: &mut Lines<impl BufRead>) -> Result<SymbolTable, Error> {
    let mut table = SymbolTable::default();
    // Placed once the section is read: a position counts from the outer function, the model from
    // the innermost.
    let mut positions: Vec<Position> = Vec::new();
    while let Some((no, line)) = lines.next()? {
        if line.starts_with(syntax::MARKER.as_bytes()) {
            if is_marker(line, syntax::SYMBOL) {
                return Err(malformed(
                    no,
                    line,
                    "`---` closing the symbol section (a second `--- symbol` starts here)",
                ));
            }
            place_source_lines(&mut table, positions);
            return Ok(table);
        }
        read_symbol_line(no, line, &mut table, &mut positions)?;
    }
    Err(not_heap(
        "a `--- symbol` section with no heap profile after it",
    ))
}

/// One line inside the symbol section, into `table` (names, the binary) or `positions`.
fn read_symbol_line(
    no: usize,
    line: &[u8],
    table: &mut SymbolTable,
    positions: &mut Vec<Position>,
) -> Result<(), Error> {
    let text = std::str::from_utf8(line)
        .map_err(|_| malformed(no, line, "a UTF-8 symbol line `0x<address> <name>`"))?;
    if text.trim().is_empty() {
        return Ok(());
    }
    if let Some(rest) = source_line_rest(text) {
        positions.push(parse_source_line(rest).ok_or_else(|| {
            malformed(
                no,
                line,
                "a source line `# line 0x<address> <position> <line> <file>`",
            )
        })?);
    } else if text.starts_with(syntax::COMMENT) {
        // Other comments: jeprof ignores every line it does not recognise, and so do we.
    } else if let Some((digits, names)) = split_symbol_line(text) {
        let address = parse_hex(digits.as_bytes())
            .ok_or_else(|| malformed(no, line, "a symbol address that fits in 64 bits"))?;
        table.names.insert(address, split_names(names));
    } else if let Some(value) = text.strip_prefix(syntax::BINARY) {
        table.binary = Some(value.trim().to_string());
    } else if text
        .split_once('=')
        .is_some_and(|(k, _)| k.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        // jeprof warns about and ignores unknown `variable=value` lines; so do we.
    } else {
        return Err(malformed(
            no,
            line,
            "a symbol line `0x<address> <name>`, `binary=<name>`, or `---`",
        ));
    }
    Ok(())
}

/// What follows `# line ` on a source position line.
fn source_line_rest(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(syntax::COMMENT)?.strip_prefix(' ')?;
    after_word(rest, syntax::SOURCE_LINE)
}

/// jeprof's symbol line, `^0x0*([0-9a-f]+)\s+(.+)`, split by hand (a merge reads thousands of
/// these per dump): the hex digits (lowercase only, as jeprof's pattern) and the names.
fn split_symbol_line(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("0x")?;
    let end = rest
        .find(|c: char| !matches!(c, '0'..='9' | 'a'..='f'))
        .unwrap_or(rest.len());
    let (digits, after) = rest.split_at(end);
    let names = after.trim_start();
    let separated = after.len() > names.len();
    (!digits.is_empty() && separated && !names.is_empty()).then_some((digits, names))
}

/// The names of a symbol line, innermost first: jeprof's form is `outer--inlined--more_inlined`.
fn split_names(names: &str) -> Vec<String> {
    // Sized exactly: collecting from `split` would reserve room for four names, tripling the
    // memory a section of a million one-name entries takes.
    let text = names.trim_end();
    let mut names: Vec<String> = match separators(text.as_bytes()) {
        0 => vec![text.to_string()],
        n => {
            let mut names = Vec::with_capacity(n + 1);
            names.extend(text.split(syntax::INLINE_SEPARATOR).map(str::to_string));
            names
        }
    };
    names.reverse();
    names
}

/// How many pieces `split("--")` cuts `text` into, less one: the `--` found left to right, not
/// overlapping (a byte loop: `str::matches` sets up a substring searcher on every call).
fn separators(text: &[u8]) -> usize {
    let separator = syntax::INLINE_SEPARATOR.as_bytes();
    let (mut count, mut i) = (0, 0);
    while i + separator.len() <= text.len() {
        if text[i..i + separator.len()] == *separator {
            count += 1;
            i += separator.len();
        } else {
            i += 1;
        }
    }
    count
}

/// `0x<address> <position> <line> <file>` of a `# line` symbol line (`crate::write` writes them).
fn parse_source_line(text: &str) -> Option<Position> {
    let (address, rest) = text.split_once(' ')?;
    let (position, rest) = rest.split_once(' ')?;
    let (number, file) = rest.split_once(' ')?;
    let address = parse_hex(address.strip_prefix("0x")?.as_bytes())?;
    let file = file.trim_end_matches(['\r', '\n']);
    if file.is_empty() {
        return None;
    }
    let source = SourceLine {
        file: file.to_string(),
        line: number.parse().ok()?,
    };
    Some((address, position.parse().ok()?, source))
}

/// Puts each `# line` position beside the name it belongs to; a position for an address or a
/// name the section does not have is dropped (it describes nothing a report shows).
fn place_source_lines(table: &mut SymbolTable, positions: Vec<Position>) {
    for (address, position, source) in positions {
        let Some(names) = table.names.get(&address) else {
            continue;
        };
        // Counted from the end without `position + 1`, which overflows at `usize::MAX`.
        let Some(i) = (position < names.len()).then(|| names.len() - 1 - position) else {
            continue;
        };
        let slots = table
            .lines
            .entry(address)
            .or_insert_with(|| vec![None; names.len()]);
        slots[i] = Some(source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_position_beyond_the_names_is_dropped_even_at_the_largest_position() {
        // `usize::MAX` once wrapped to a slot past the names (a panic), found by replaying
        // mutated fixtures through the reader.
        for position in ["1", "18446744073709551615"] {
            let dump = format!(
                "--- symbol\n0x0000000000001000 main\n# line 0x0000000000001000 {position} 7 a.rs\n\
                 ---\n--- heap\nheap_v2/1\n  t*: 1: 1 [0: 0]\n@ 0x1000\n  t*: 1: 1 [0: 0]\n\
                 MAPPED_LIBRARIES:\n"
            );
            let profile = crate::read::parse(dump.as_bytes()).expect("reads");
            let symbols = profile.symbols.expect("a symbol section");
            assert_eq!(symbols.names[&0x1000], ["main"]);
            assert!(symbols.lines.is_empty(), "{position}: {:?}", symbols.lines);
        }
    }

    #[test]
    fn separators_count_the_pieces_split_makes() {
        for text in [
            "", "a", "-", "--", "---", "----", "a--b", "a---b", "--a--", "a-b--c-",
        ] {
            assert_eq!(
                separators(text.as_bytes()) + 1,
                text.split(syntax::INLINE_SEPARATOR).count(),
                "{text:?}"
            );
        }
    }
}
