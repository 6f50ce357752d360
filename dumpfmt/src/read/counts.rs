//! Counts lines, `t<uid or *>: <n>: <s> [<n>: <s>]`, and the figures jeprof makes of them.

use std::sync::OnceLock;

use regex::Regex;

use super::errors::{malformed, COUNTS_EXPECTED};
use crate::error::Error;
use crate::math;
use crate::model::{Counts, Estimate};
use crate::syntax;

fn counts_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // jeprof's own pattern (bin/jeprof.in, ReadThreadedHeapProfile), applied to the trimmed line, with
    // an optional thread name after `]` that only header thread lines may carry.
    RE.get_or_init(|| {
        Regex::new(r"^t(\*|\d+):\s+(\d+):\s+(\d+)\s+\[\s*(\d+):\s+(\d+)\](?:\s+(.*))?$")
            .expect("static regex")
    })
}

/// A parsed counts line: `None` for the `t*` thread.
pub(super) struct CountsLine<'a> {
    pub(super) thread: Option<u64>,
    pub(super) values: [u64; 4],
    pub(super) name: Option<&'a str>,
}

/// The counts line `line` (trimmed; `raw` as read, for errors), refused where jeprof would divide
/// by zero.
pub(super) fn parse_counts<'a>(
    no: usize,
    raw: &[u8],
    line: &'a [u8],
) -> Result<CountsLine<'a>, Error> {
    let parsed = match fast_counts(line) {
        Some(parsed) => parsed,
        None => slow_counts(no, raw, line)?,
    };
    let v = &parsed.values;
    if (v[0] > 0 && v[1] == 0) || (v[2] > 0 && v[3] == 0) {
        return Err(malformed(
            no,
            raw,
            "bytes above zero wherever objects are (jeprof divides by zero on this line)",
        ));
    }
    Ok(parsed)
}

const ALL_THREADS: u8 = syntax::ALL_THREADS as u8;

/// The canonical form jemalloc writes, `t<uid|*>: <n>: <s> [<n>: <s>]` with single spaces and an
/// optional ` <name>`, parsed without the regex (the reader's hot loop). Anything else, or a number
/// that overflows, returns `None` and goes through [`slow_counts`], which is the authority.
fn fast_counts(line: &[u8]) -> Option<CountsLine<'_>> {
    let mut pos = 1;
    let thread = if line.get(pos) == Some(&ALL_THREADS) {
        pos += 1;
        None
    } else {
        Some(digits(line, &mut pos)?)
    };
    let mut values = [0u64; 4];
    for (k, separator) in [b": ", b": ", b" [", b": "].into_iter().enumerate() {
        if line.get(pos..pos + 2)? != separator {
            return None;
        }
        pos += 2;
        values[k] = digits(line, &mut pos)?;
    }
    if line.get(pos) != Some(&b']') {
        return None;
    }
    pos += 1;
    let name = match line.get(pos) {
        None => None,
        Some(b' ') => Some(std::str::from_utf8(&line[pos + 1..]).ok()?.trim()),
        Some(_) => return None,
    };
    if name.is_some_and(str::is_empty) {
        return None;
    }
    Some(CountsLine {
        thread,
        values,
        name,
    })
}

/// The decimal number at `pos`, which is moved past it; `None` if there is none or it overflows.
fn digits(line: &[u8], pos: &mut usize) -> Option<u64> {
    let start = *pos;
    let mut value: u64 = 0;
    while let Some(&d) = line.get(*pos) {
        if !d.is_ascii_digit() {
            break;
        }
        value = value.checked_mul(10)?.checked_add((d - b'0') as u64)?;
        *pos += 1;
    }
    (*pos > start).then_some(value)
}

/// The regex path: every counts line jeprof accepts, and the error for the ones it does not.
fn slow_counts<'a>(no: usize, raw: &[u8], line: &'a [u8]) -> Result<CountsLine<'a>, Error> {
    let text = std::str::from_utf8(line).map_err(|_| malformed(no, raw, COUNTS_EXPECTED))?;
    let c = counts_regex()
        .captures(text)
        .ok_or_else(|| malformed(no, raw, COUNTS_EXPECTED))?;
    let mut values = [0u64; 4];
    for (k, slot) in values.iter_mut().enumerate() {
        *slot = c[k + 2].parse::<u64>().map_err(|_| {
            malformed(
                no,
                raw,
                "counts that fit in 64 bits (at most 18446744073709551615)",
            )
        })?;
    }
    let thread = match c.get(1).map(|m| m.as_str()) {
        Some("*") | None => None,
        Some(t) => Some(
            t.parse::<u64>()
                .map_err(|_| malformed(no, raw, "a thread uid that fits in 64 bits"))?,
        ),
    };
    Ok(CountsLine {
        thread,
        values,
        name: c.get(6).map(|m| m.as_str()),
    })
}

/// Decodes one `n1: s1 [n2: s2]` line the way jeprof does, with the variance estimated as if every
/// sample behind the entry had the entry's average size (all a jemalloc dump allows).
pub(super) fn decode_counts(v: &[u64; 4], period: u64) -> Counts {
    let estimate = |n: u64, s: u64| {
        let (objects, bytes, objects_variance, bytes_variance) =
            math::jeprof_unbias_with_variance(n, s, period);
        Estimate {
            objects,
            bytes,
            objects_variance,
            bytes_variance,
        }
    };
    Counts {
        inuse: estimate(v[0], v[1]),
        accum: estimate(v[2], v[3]),
    }
}
