//! jeprof's `--lines`: a report's rows are functions at source lines, `name file:line`, as
//! jeprof's `TranslateStack` names them (`$func $fileline`, inlined functions `name (inline)
//! file:line`).
//!
//! - Raw dumps with `--binary`: the lines come from the program's DWARF, as jeprof's from
//!   `addr2line -i`; an address nothing names prints `0x<16 hex digits> ??:0`, and without a
//!   program the bare key followed by a space, as jeprof prints them. Not reproduced: binutils'
//!   ` (discriminator N)` suffix (the `addr2line` crate does not give discriminators), so where
//!   jeprof prints two rows for one line that differ only there, we print one.
//! - Dumps with a symbol section: jeprof refuses `--lines` ("cannot be used without a binary");
//!   we use the section's `# line` entries ([`jeprof_dumpfmt::SymbolTable::lines`]), and a name
//!   without one prints `name ??:0`.

use jeprof_dumpfmt::SourceLine;

/// `name file:line`, or `name ??:0` when the line is unknown (addr2line's spelling).
pub fn with_line(name: &str, line: Option<&SourceLine>) -> String {
    match line {
        Some(line) => format!("{name} {line}"),
        None => format!("{name} ??:0"),
    }
}

/// An address nothing names, at `--lines`: `0x<key> ??:0` where a program was looked in (jeprof's
/// nm entry for it has addr2line's `??:0`), else the bare key and a space (jeprof's entry is
/// `[key, "", key]`).
pub fn unnamed_with_line(key: u64, prefixed: bool) -> String {
    if prefixed {
        format!("0x{key:016x} ??:0")
    } else {
        format!("{key:016x} ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_spell_their_lines_as_jeprof() {
        let line = SourceLine {
            file: "/src/prog.c".into(),
            line: 3,
        };
        assert_eq!(
            with_line("leaf_alloc", Some(&line)),
            "leaf_alloc /src/prog.c:3"
        );
        assert_eq!(with_line("f (inline)", None), "f (inline) ??:0");
        assert_eq!(unnamed_with_line(0x7f00, true), "0x0000000000007f00 ??:0");
        assert_eq!(unnamed_with_line(0x40112f, false), "000000000040112f ");
    }
}
