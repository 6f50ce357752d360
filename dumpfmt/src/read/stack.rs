//! Stack entries: the addresses of a `@` line, and where each stack goes once it is complete.

use super::errors::malformed;
use crate::error::Error;
use crate::model::{Profile, Stack};

/// Where the stacks of a dump go as they are completed: `on_stack`, in order, each checked first.
pub(super) struct StackSink<'f, F> {
    on_stack: &'f mut F,
    /// Stacks completed so far: the index [`Profile::validate`] would name the next one by.
    completed: usize,
    /// The first stack whose figures are not valid. [`super::read_with`] checks the figures once
    /// the whole dump is read, so an error on a later line is the one reported; this keeps that
    /// order.
    pub(super) invalid: Option<Error>,
}

impl<'f, F: FnMut(&Profile, Stack)> StackSink<'f, F> {
    pub(super) fn new(on_stack: &'f mut F) -> StackSink<'f, F> {
        StackSink {
            on_stack,
            completed: 0,
            invalid: None,
        }
    }

    /// Hands `stack` over with the profile read so far, unless its figures (or an earlier
    /// stack's) are not valid.
    pub(super) fn complete(&mut self, profile: &Profile, stack: Stack) {
        let index = self.completed;
        self.completed += 1;
        if self.invalid.is_some() {
            return;
        }
        match crate::model::validate_stack(index, &stack) {
            Ok(()) => (self.on_stack)(profile, stack),
            Err(e) => self.invalid = Some(e),
        }
    }
}

/// The addresses of a `@` line, in one pass over its bytes (the reader's hottest loop): tokens
/// separated by whitespace, each `0x` (or `0X`, or nothing) and at most 16 significant hex digits.
/// `rest` is what follows the `@`.
pub(super) fn parse_frames(no: usize, raw: &[u8], rest: &[u8]) -> Result<Vec<u64>, Error> {
    let bad = || {
        malformed(
            no,
            raw,
            "hexadecimal frame addresses of at most 64 bits (`0x…`)",
        )
    };
    if !rest.is_empty() && !rest[0].is_ascii_whitespace() {
        return Err(malformed(no, raw, "a space after `@`"));
    }
    // Sized for jemalloc's (and our) single-space form, so that a million stacks hold their frames
    // and not spare capacity.
    let mut frames = Vec::with_capacity(memchr::memchr_iter(b' ', rest).count().max(1));
    let mut i = 0;
    while i < rest.len() {
        if rest[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if rest[i] == b'0' && rest.get(i + 1).is_some_and(|&x| x | 0x20 == b'x') {
            i += 2;
        }
        let start = i;
        let (mut value, mut significant) = (0u64, 0u32);
        while let Some(&byte) = rest.get(i) {
            let digit = HEX[byte as usize];
            if digit > 15 {
                break;
            }
            significant += u32::from(significant > 0 || digit != 0);
            value = (value << 4) | u64::from(digit);
            i += 1;
        }
        let ends_token = rest.get(i).is_none_or(u8::is_ascii_whitespace);
        if i == start || significant > 16 || !ends_token {
            return Err(bad());
        }
        frames.push(value);
    }
    Ok(frames)
}

/// The value of hex `digits` (either case, without `0x`): `None` if there are none, if one is
/// not a hex digit, or if they do not fit in 64 bits.
pub(super) fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    // At most 16 significant digits; leading zeros are allowed (jeprof strips them).
    let significant = &digits[digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(digits.len())..];
    if significant.len() > 16 {
        return None;
    }
    let mut value: u64 = 0;
    for &d in digits {
        let nibble = HEX[d as usize];
        if nibble > 15 {
            return None;
        }
        value = (value << 4) | nibble as u64;
    }
    Some(value)
}

/// Hex digit values, 0xff for anything else.
const HEX: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};
