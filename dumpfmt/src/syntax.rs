//! The heap_v2 grammar: every marker, prefix and word that the [`read`](crate::read)er matches
//! and the [`write`](mod@crate::write)r prints, defined once so that the two cannot drift apart.
//!
//! A dump as jemalloc writes it (`src/prof_data.c`, `src/prof_sys.c`) and jeprof reads it
//! (`ReadProfileHeader`, `ReadSymbols` and `ReadThreadedHeapProfile` in `bin/jeprof.in`), with the
//! lines only this crate writes marked *ours* (comments to jeprof, which skips every line it does
//! not recognise):
//!
//! ```text
//! %<anything>                              skipped before the header, as jeprof does
//! --- symbol                               optional; ours when symbolized (`WriteOptions::symbols`)
//! binary=<program>
//! 0x<key> <outer>--<inlined>...            keys are the addresses jeprof looks up (callers minus one)
//! # line 0x<key> <pos> <line> <file>       ours: source position of name <pos> (0: outer)
//! ---
//! --- heap                                 (or `--- growth`)
//! heap_v2/<R>                              the header: the period jeprof scales with
//!   t*: <n>: <s> [<n>: <s>]                header totals (jeprof never reads them)
//!   t<uid>: <n>: <s> [<n>: <s>] <name>     header per-thread lines
//! # writer: jeprof-dumpfmt                 ours: this dump ends with `# end of dump`
//! # sample_period: <R>                     ours: the sampling period, when the header has another
//! # <key>: <value>                         annotations
//! # build_id: <hex> <path>                 ours: a mapped file's GNU build id (crate::build_ids)
//! # label <key> <value>                    labels (crate::labels), the value verbatim to the end
//! @ 0x<leaf> 0x<caller> ...                a stack entry, innermost frame first
//!   t*: <n>: <s> [<n>: <s>]                its counts: in use, then accumulated
//!   t<uid>: <n>: <s> [<n>: <s>]            one thread's share
//!   # var <objs> <bytes> <objs> <bytes>    ours: the entry's variances
//!   # scope <objs> <bytes> <objs var> <bytes var> <label>   ours: per-scope in-use figures
//!
//! MAPPED_LIBRARIES:                        (or gperftools' `--- Memory map:`)
//! <the process's /proc/self/maps, verbatim>
//! # end of dump                            ours, always last
//! ```
//!
//! Blank lines may appear anywhere in the body. A comment line is known by its first word after
//! [`COMMENT`] and any blanks ([`COMMENT_WORDS`]); any other comment before the first stack is an
//! annotation, `# <key>: <value>`. What the reader accepts beyond this (and refuses) is said in
//! [`crate::read`]; what the writer chooses within it, in [`crate::write`].

/// Starts a section marker, `--- <name>`: jeprof matches `^--- *<name>`. Alone on its line, it
/// closes the symbol section.
pub const MARKER: &str = "---";
/// The symbol section's name: `--- symbol` opens it.
pub const SYMBOL: &str = "symbol";
/// The heap profile's name: `--- heap` follows a symbol section.
pub const HEAP: &str = "heap";
/// jeprof's other profile name, accepted where [`HEAP`] is.
pub const GROWTH: &str = "growth";

/// The format's name, which starts the header `heap_v2/<sample period>`.
pub const FORMAT: &str = "heap_v2";
/// Separates [`FORMAT`] from the sample period in the header.
pub const PERIOD_SEPARATOR: char = '/';
/// How gperftools' legacy heap profiles begin (jeprof reads them; this crate does not).
pub const LEGACY_HEADER: &str = "heap profile:";

/// In the symbol section, `binary=<program>` names the program.
pub const BINARY: &str = "binary=";
/// Separates the names of one symbol line, outer function first: `outer--inlined`.
pub const INLINE_SEPARATOR: &str = "--";
/// The word of a symbol section's source position line, `# line 0x<key> <pos> <line> <file>`.
pub const SOURCE_LINE: &str = "line";

/// Starts a stack line, `@ 0x<leaf> 0x<caller> ...`.
pub const STACK: char = '@';
/// Starts a counts line, `t<uid>: ...` or `t*: ...`.
pub const COUNTS: char = 't';
/// The thread of a counts line that holds all threads together, `t*`.
pub const ALL_THREADS: char = '*';

/// Starts a comment line: jeprof skips it (in the body it matches nothing jeprof knows).
pub const COMMENT: char = '#';
/// Separates an annotation's key from its value, `# <key>: <value>`.
pub const ANNOTATION_SEPARATOR: char = ':';
/// The word of a label line, `# label <key> <value>` ([`crate::labels`]).
pub const LABEL: &str = "label";
/// How the writer starts a label line: [`COMMENT`], a blank, [`LABEL`], a blank.
pub const LABEL_LINE_PREFIX: &str = "# label ";
/// The word of a variance line, `# var <objects> <bytes> <objects> <bytes>`, after a stack.
pub const VAR: &str = "var";
/// The word of a scope line, `# scope <objects> <bytes> <objects variance> <bytes variance>
/// <label>`, after a stack ([`crate::scopes`]).
pub const SCOPE: &str = "scope";
/// The words by which the body's comment lines are known; no annotation key may read as one.
pub const COMMENT_WORDS: [&str; 3] = [LABEL, VAR, SCOPE];

/// The annotation that records the sampling period when the header carries another one (which
/// the writer may choose for rounding).
pub const SAMPLE_PERIOD: &str = "sample_period";
/// The annotation key by which a dump says it was written by [`crate::write`] and therefore ends
/// with [`END_MARKER`].
pub const WRITER_KEY: &str = "writer";
/// [`WRITER_KEY`]'s value.
pub const WRITER: &str = "jeprof-dumpfmt";
/// The last line of every dump [`crate::write`] writes. jeprof ignores it (a comment in the body, an
/// unrecognised line in the memory map); a dump that announces it and lacks it was cut.
pub const END_MARKER: &str = "# end of dump";

/// Starts the memory map, which runs to the end of the dump (jemalloc writes it last).
pub const MAPPED_LIBRARIES: &str = "MAPPED_LIBRARIES:";
/// gperftools' start of the memory map, which jeprof accepts in place of [`MAPPED_LIBRARIES`].
pub const LEGACY_MEMORY_MAP: &str = "--- Memory map:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_line_prefix_and_the_end_marker_are_comments_made_of_their_words() {
        assert_eq!(LABEL_LINE_PREFIX, format!("{COMMENT} {LABEL} "));
        assert!(END_MARKER.starts_with(COMMENT));
        assert!(LEGACY_MEMORY_MAP.starts_with(MARKER));
    }
}
