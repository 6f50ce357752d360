//! Telling a complete dump from one cut while being written, and what a cut dump lost.
//!
//! jemalloc writes the memory map last and this crate's writer [`END_MARKER`] after it, so a dump
//! that ends without them (or inside a line, or after a stack without its counts) was cut.

use crate::error::Error;
use crate::syntax::END_MARKER;

/// What was lost from a dump that was cut while being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The dump's last line (1-based).
    pub line_number: usize,
    /// How the dump ends, in words (the same text as [`Error::Truncated`]'s).
    pub what: String,
    /// Stacks read without their figures, and dropped.
    pub dropped_stacks: usize,
    /// Bytes of an incomplete last line, dropped.
    pub dropped_bytes: usize,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line_number, self.what)?;
        let mut dropped = Vec::new();
        if self.dropped_stacks > 0 {
            dropped.push(format!(
                "{} stack(s) without their counts",
                self.dropped_stacks
            ));
        }
        if self.dropped_bytes > 0 {
            dropped.push(format!("the cut line ({} bytes)", self.dropped_bytes));
        }
        if dropped.is_empty() {
            write!(f, "; read what is there (nothing was dropped)")
        } else {
            write!(f, "; dropped {}", dropped.join(" and "))
        }
    }
}

/// Where the body's reading stands when the input ends, to tell a complete dump from a cut one.
#[derive(Default)]
pub(super) struct BodyEnd {
    /// The dump says it was written by [`crate::write`], which ends every dump with [`END_MARKER`].
    pub(super) announced_end_marker: bool,
    /// [`END_MARKER`] was read.
    pub(super) end_marker: bool,
    /// The memory map was read.
    pub(super) maps: bool,
    /// The input ends in the middle of this line (its number and length).
    pub(super) cut_line: Option<(usize, usize)>,
    /// The input ends after the stack at this line, before its counts.
    pub(super) awaiting_counts: Option<usize>,
    /// The dump's last line.
    pub(super) last: usize,
}

/// How a dump was cut: where, the bytes of a cut line, in words.
struct Cut {
    line_number: usize,
    dropped_bytes: usize,
    what: String,
}

impl BodyEnd {
    /// How the dump was cut, or `None` if it is complete.
    fn cut(&self) -> Option<Cut> {
        let cut = |line_number, dropped_bytes, what| Cut {
            line_number,
            dropped_bytes,
            what,
        };
        let last = self.last;
        if let Some((line, bytes)) = self.cut_line {
            // An incomplete line inside the memory map loses one mapping; in the body, a cut `@`
            // line loses its stack (pushed before it was known to be cut: it was not) and a cut
            // counts line its figures.
            let what =
                format!("the dump ends in the middle of line {line} (no newline): it was cut");
            Some(cut(line, bytes, what))
        } else if let Some(at) = self.awaiting_counts {
            let what = format!(
                "the dump ends after the stack at line {at}, before its counts: it was cut"
            );
            Some(cut(at, 0, what))
        } else if self.announced_end_marker && !self.end_marker {
            let what = format!(
                "the dump ends at line {last} without `{END_MARKER}`, which its writer puts last: \
                 it was cut"
            );
            Some(cut(last, 0, what))
        } else if !self.end_marker && !self.maps {
            let what = format!(
                "the dump ends at line {last} without the `MAPPED_LIBRARIES:` section that \
                 jemalloc writes last: it was cut"
            );
            Some(cut(last, 0, what))
        } else {
            None
        }
    }

    /// The reading's outcome: `None` for a complete dump, what was lost from a cut one when
    /// `allow_truncated`, [`Error::Truncated`] otherwise. `invalid` (a stack's figures that are not
    /// valid) is reported unless the cut is, as [`crate::read::read_with`] always checked figures
    /// last.
    pub(super) fn outcome(
        &self,
        allow_truncated: bool,
        invalid: Option<Error>,
    ) -> Result<Option<Truncation>, Error> {
        let Some(cut) = self.cut() else {
            return match invalid {
                Some(e) => Err(e),
                None => Ok(None),
            };
        };
        if !allow_truncated {
            return Err(Error::Truncated {
                file: None,
                line_number: cut.line_number,
                what: cut.what,
            });
        }
        if let Some(e) = invalid {
            return Err(e);
        }
        Ok(Some(Truncation {
            line_number: cut.line_number,
            what: cut.what,
            // The stack read without its figures is not handed over.
            dropped_stacks: usize::from(self.awaiting_counts.is_some()),
            dropped_bytes: cut.dropped_bytes,
        }))
    }
}
