//! The reader's errors: input that is not a heap_v2 dump, and a malformed line (its number, its
//! text, what was expected there). The file is added by the entry points that know it.

use crate::error::Error;

/// What a counts line looks like.
pub(super) const COUNTS_EXPECTED: &str =
    "a counts line `t<thread or *>: <objects>: <bytes> [<objects>: <bytes>]`";
/// What a line of the body may be.
pub(super) const BODY_EXPECTED: &str = "a `@ 0x<address>...` stack line, a counts line \
     `t<thread or *>: <objects>: <bytes> [<objects>: <bytes>]`, or `MAPPED_LIBRARIES:`";

/// Not a heap_v2 dump: `found` says what it is instead.
pub(super) fn not_heap(found: &str) -> Error {
    Error::NotHeapV2 {
        file: None,
        found: found.to_string(),
    }
}

/// Line `line_number`, `line`, is not what was `expected` (the line is shown up to 200
/// characters).
pub(super) fn malformed(line_number: usize, line: &[u8], expected: &str) -> Error {
    let text = String::from_utf8_lossy(line);
    let shown: String = text.chars().take(200).collect();
    Error::Malformed {
        file: None,
        line_number,
        line: shown,
        expected: expected.to_string(),
    }
}

/// The stack at line `at` has no counts line.
pub(super) fn orphan_stack(at: usize) -> Error {
    Error::Malformed {
        file: None,
        line_number: at,
        line: String::new(),
        expected: "a `t*: <objects>: <bytes> [<objects>: <bytes>]` counts line after this stack \
                   (it has none)"
            .to_string(),
    }
}
