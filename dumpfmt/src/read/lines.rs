//! The input as numbered lines: one buffer, reused, so that memory holds the longest line and
//! never the input.

use std::io::BufRead;
use std::io::Read as _;

use super::errors::malformed;
use crate::error::Error;

/// The longest line the reader accepts: far beyond any line jemalloc or we write (a 256-frame stack
/// is about 5 KiB, a long Rust symbol line a few KiB), small enough that a file with no newlines
/// cannot make the reader hold gigabytes.
pub const MAX_LINE: usize = 16 << 20;

/// Lines with their 1-based numbers, `\r` removed as jeprof does, read one at a time into a buffer
/// that is reused (memory: the longest line, never the input).
pub(super) struct Lines<R> {
    input: R,
    buffer: Vec<u8>,
    /// The number of the last line read: at the end of the input, the dump's last line.
    pub(super) number: usize,
}

/// A line's number, its text, and whether it is cut (the input's last, with no newline).
pub(super) type CutLine<'a> = (usize, &'a [u8], bool);

impl<R: BufRead> Lines<R> {
    pub(super) fn new(input: R) -> Lines<R> {
        Lines {
            input,
            buffer: Vec::with_capacity(256),
            number: 0,
        }
    }

    /// The next line, without its newline; `None` at the end of the input.
    pub(super) fn next(&mut self) -> Result<Option<(usize, &[u8])>, Error> {
        Ok(self.next_line()?.map(|(no, line, _)| (no, line)))
    }

    /// [`Lines::next`], and whether the line is the input's last and has no newline (was cut).
    pub(super) fn next_line(&mut self) -> Result<Option<CutLine<'_>>, Error> {
        self.buffer.clear();
        let limit = MAX_LINE as u64 + 1;
        let read = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buffer)?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        let mut line = &self.buffer[..];
        // Only the input's last line can lack its newline.
        let unterminated = match line.strip_suffix(b"\n") {
            Some(l) => {
                line = l;
                false
            }
            None if read as u64 == limit => {
                return Err(malformed(
                    self.number,
                    &line[..200],
                    &format!("lines of at most {MAX_LINE} bytes (a dump is text)"),
                ))
            }
            None => true,
        };
        // jeprof removes every `\r`; the only place jemalloc could write one is a thread name, so
        // stripping trailing ones is equivalent for any dump jemalloc writes.
        while let Some(l) = line.strip_suffix(b"\r") {
            line = l;
        }
        Ok(Some((self.number, line, unterminated)))
    }

    /// The next line that does not start with `%` (jeprof's `ReadProfileHeader` skips those).
    pub(super) fn next_skipping_percent(&mut self) -> Result<Option<(usize, &[u8])>, Error> {
        loop {
            // The line's length rather than the line, so that the borrow ends with each round.
            let Some((no, len, percent)) = self
                .next()?
                .map(|(no, line)| (no, line.len(), line.starts_with(b"%")))
            else {
                return Ok(None);
            };
            if !percent {
                return Ok(Some((no, &self.buffer[..len])));
            }
        }
    }
}
