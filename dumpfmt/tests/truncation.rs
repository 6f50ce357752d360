//! Dumps cut while being written, and records that belong to nothing, are errors naming their
//! line, never figures silently lost; `ReadOptions::allow_truncated` reads a cut dump and says
//! what it dropped.

use jeprof_dumpfmt::read::{read_with, ReadOptions};
use jeprof_dumpfmt::{Error, Estimate, Profile, Stack, WriteOptions};

/// A dump as jemalloc writes it: header, three records, the memory map last.
const JEMALLOC: &str = "heap_v2/524288\n  t*: 3: 1310720 [0: 0]\n  t0: 3: 1310720 [0: 0]\n\
@ 0x401234 0x401500 0x401600\n  t*: 1: 262144 [0: 0]\n  t0: 1: 262144 [0: 0]\n\
@ 0x401300 0x401500\n  t*: 1: 524288 [0: 0]\n  t0: 1: 524288 [0: 0]\n\
@ 0x401400 0x401600\n  t*: 1: 524288 [0: 0]\n  t0: 1: 524288 [0: 0]\n\
\nMAPPED_LIBRARIES:\n00400000-00402000 r-xp 00000000 08:01 1234 /usr/bin/prog\n\
7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n";

fn strict(text: &str) -> Result<Profile, Error> {
    jeprof_dumpfmt::read::parse(text.as_bytes())
}

fn lenient(text: &str) -> jeprof_dumpfmt::read::Read {
    read_with(
        text.as_bytes(),
        &ReadOptions {
            allow_truncated: true,
        },
    )
    .expect("a cut dump reads with allow_truncated")
}

fn truncated_at(text: &str) -> (usize, String) {
    match strict(text) {
        Err(Error::Truncated {
            line_number, what, ..
        }) => (line_number, what),
        other => panic!("expected a truncation error, got {other:?} for {text:?}"),
    }
}

fn malformed_at(text: &str) -> (usize, String) {
    match strict(text) {
        Err(Error::Malformed {
            line_number,
            expected,
            ..
        }) => (line_number, expected),
        other => panic!("expected a malformed-line error, got {other:?} for {text:?}"),
    }
}

fn bytes(p: &Profile) -> f64 {
    p.totals().inuse.bytes
}

/// Byte offset of the start of 1-based line `n`.
fn line_start(text: &str, n: usize) -> usize {
    text.split_inclusive('\n').take(n - 1).map(str::len).sum()
}

#[test]
fn the_complete_dump_reads_without_a_word() {
    let p = strict(JEMALLOC).unwrap();
    assert_eq!(p.stacks.len(), 3);
    assert!(lenient(JEMALLOC).truncation.is_none());
}

#[test]
fn a_dump_cut_at_a_record_boundary_is_an_error_naming_its_last_line() {
    let cut = &JEMALLOC[..JEMALLOC.find("\nMAPPED_LIBRARIES").unwrap() + 1];
    let (line, what) = truncated_at(cut);
    assert_eq!(line, cut.lines().count());
    assert!(what.contains("MAPPED_LIBRARIES"), "{what}");
    let read = lenient(cut);
    assert_eq!(read.profile.stacks.len(), 3, "nothing is dropped");
    assert_eq!(read.truncation.unwrap().dropped_stacks, 0);
}

#[test]
fn a_dump_cut_between_a_stack_and_its_counts_names_the_stack_and_drops_it() {
    // Lines 10 and 11 are the third record's `@` and `t*` lines.
    let cut = &JEMALLOC[..line_start(JEMALLOC, 11)];
    let (line, what) = truncated_at(cut);
    assert_eq!(line, 10);
    assert!(what.contains("before its counts"), "{what}");
    let read = lenient(cut);
    assert_eq!(read.profile.stacks.len(), 2);
    assert_eq!(read.truncation.unwrap().dropped_stacks, 1);
    let third = jeprof_dumpfmt::read::parse(
        b"heap_v2/524288\n@ 0x1\n  t*: 1: 524288 [0: 0]\nMAPPED_LIBRARIES:\n",
    )
    .unwrap();
    let kept = bytes(&strict(JEMALLOC).unwrap()) - bytes(&third);
    assert!((bytes(&read.profile) - kept).abs() < 1e-6 * kept);
}

#[test]
fn a_dump_cut_inside_any_line_is_an_error_naming_that_line() {
    for (line, column) in [(7, 5), (8, 9), (11, 14), (14, 9), (15, 20), (16, 3)] {
        // Line 7: inside an `@` line; 8 and 11: inside counts lines; 14: inside
        // `MAPPED_LIBRARIES:`; 15 and 16: inside the map.
        let cut = &JEMALLOC[..line_start(JEMALLOC, line) + column];
        let (at, what) = truncated_at(cut);
        assert_eq!(at, line, "{what}");
        assert!(what.contains("middle of line"), "{what}");
        let t = lenient(cut).truncation.unwrap();
        assert_eq!((t.line_number, t.dropped_bytes), (line, column));
    }
    // A cut `@` line loses its stack, not part of its frames.
    let cut = &JEMALLOC[..line_start(JEMALLOC, 7) + 12];
    let read = lenient(cut);
    assert_eq!(read.profile.stacks.len(), 1);
}

#[test]
fn our_dumps_cut_anywhere_in_the_memory_map_are_known_to_be_cut() {
    let mut p = Profile::new(1 << 19);
    let mut s = Stack {
        frames: vec![0x401234, 0x401500],
        ..Stack::default()
    };
    s.counts
        .inuse
        .add(&Estimate::of_sample(4096.0, (1 << 19) as f64));
    p.stacks.push(s);
    p.mapped_libraries = Some(
        "00400000-00402000 r-xp 00000000 08:01 1 /bin/prog\n\
         7f0000000000-7f0000100000 r-xp 00000000 08:01 2 /lib/libc.so.6\n"
            .to_string(),
    );
    for maps in [p.mapped_libraries.clone(), None] {
        p.mapped_libraries = maps;
        let text = jeprof_dumpfmt::write::to_string(&p, &WriteOptions::default()).unwrap();
        assert!(strict(&text).is_ok());
        // Every cut at a line boundary, the map's included, is reported.
        let lines = text.lines().count();
        for keep in 1..lines {
            let cut = &text[..line_start(&text, keep + 1)];
            match strict(cut) {
                Err(Error::Truncated { .. }) => {}
                other => panic!("cut after line {keep} of\n{text}: {other:?}"),
            }
        }
    }
}

#[test]
fn records_that_belong_to_no_stack_are_errors_naming_their_line() {
    let header = "heap_v2/524288\n  t*: 2: 8 [0: 0]\n";
    let end = "MAPPED_LIBRARIES:\n";
    // A stack with no counts, followed by another stack.
    let (line, expected) = malformed_at(&format!("{header}@ 0x1\n@ 0x2\n  t*: 1: 8 [0: 0]\n{end}"));
    assert_eq!(line, 3);
    assert!(
        expected.contains("counts line after this stack"),
        "{expected}"
    );
    // Counts after a stack already counted.
    let (line, _) = malformed_at(&format!(
        "{header}@ 0x1\n  t*: 1: 8 [0: 0]\n  t*: 1: 8 [0: 0]\n{end}"
    ));
    assert_eq!(line, 5);
    // A second total in the header: counts with no stack.
    let (line, expected) = malformed_at(&format!("{header}  t*: 1: 8 [0: 0]\n{end}"));
    assert_eq!(line, 3);
    assert!(expected.contains("belongs to no stack"), "{expected}");
    // A bare `@` before any stack (jeprof would drop its counts).
    let (line, _) = malformed_at(&format!("{header}@\n  t*: 1: 8 [0: 0]\n{end}"));
    assert_eq!(line, 3);
    // A stack with no counts just before the memory map.
    let (line, _) = malformed_at(&format!("{header}@ 0x1\n{end}"));
    assert_eq!(line, 3);
}

#[test]
fn a_second_symbol_section_is_an_error_naming_its_line() {
    let text = "--- symbol\nbinary=p\n0x1 f\n---\n--- symbol\n0x2 g\n---\n--- heap\n\
                heap_v2/524288\nMAPPED_LIBRARIES:\n";
    let (line, expected) = malformed_at(text);
    assert_eq!(line, 5);
    assert!(expected.contains("second `--- symbol`"), "{expected}");
}
