//! Labels naming a profile's origin ([`Profile::labels`](crate::Profile::labels)): program,
//! build id, host, pid, service, the moment of the dump, or whatever a fleet pipeline adds
//! (`--label k=v`).
//!
//! In a heap_v2 dump each label is a comment line before the first stack, which jeprof skips like
//! every other comment (`docs/design.md` §13):
//!
//! ```text
//! # label <key> <value>
//! ```
//!
//! The key is `[A-Za-z0-9_.-]+`; the value is the rest of the line, verbatim (spaces at either end
//! included), and may be any text without a line break (`\n` or `\r`: jeprof removes every `\r`,
//! and a `\n` would end the line). Keys are unique within a profile; their order is kept. A label
//! that breaks these rules is an error on writing
//! ([`Profile::validate`](crate::Profile::validate)) and on reading (the line's number and text),
//! never silently changed.
//!
//! [`rfc3339_utc`] and [`parse_rfc3339`] convert the `time` label, by which the shim records when
//! a dump was taken.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;

/// The comment that starts a label line, `# label ` (defined with the rest of the grammar in
/// [`crate::syntax`], whose [`LABEL`](crate::syntax::LABEL) word the reader knows a label line by).
pub use crate::syntax::LABEL_LINE_PREFIX as LINE_PREFIX;

/// Why `key` cannot be a label's key, or `None` if it can.
pub fn key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        return Some("a label key must not be empty");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    (!key.chars().all(allowed))
        .then_some("a label key has only ASCII letters, digits, `_`, `.` and `-`")
}

/// Why `value` cannot be a label's value, or `None` if it can.
pub fn value_problem(value: &str) -> Option<&'static str> {
    value
        .contains(['\n', '\r'])
        .then_some("a label value must not contain a line break (`\\n` or `\\r`)")
}

/// Checks one label and that `labels` holds no earlier label with the same key.
fn check(labels: &[(String, String)], index: usize) -> Result<(), Error> {
    let (key, value) = &labels[index];
    let problem = key_problem(key)
        .or_else(|| value_problem(value))
        .or_else(|| {
            labels[..index]
                .iter()
                .any(|(k, _)| k == key)
                .then_some("label keys must be unique")
        });
    match problem {
        Some(problem) => Err(Error::Invalid(format!(
            "label {key:?}={value:?}: {problem}"
        ))),
        None => Ok(()),
    }
}

/// Checks every label of a profile
/// ([`Profile::validate`](crate::Profile::validate) calls this with its labels).
pub(crate) fn validate(labels: &[(String, String)]) -> Result<(), Error> {
    (0..labels.len()).try_for_each(|i| check(labels, i))
}

/// Sets `key` to `value` in `labels`: replaces the value in place if the key is there (its
/// position is kept), appends the label otherwise.
pub fn set(labels: &mut Vec<(String, String)>, key: &str, value: &str) {
    match labels.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_string(),
        None => labels.push((key.to_string(), value.to_string())),
    }
}

/// The value of label `key`, if present.
pub fn get<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Parses what follows [`LINE_PREFIX`]: the key, one space, the value (the rest). An error
/// message if the key is bad; the value cannot hold a line break (it is the rest of one line).
pub(crate) fn parse_line(rest: &str) -> Result<(String, String), &'static str> {
    let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
    if let Some(problem) = key_problem(key).or_else(|| value_problem(value)) {
        return Err(problem);
    }
    Ok((key.to_string(), value.to_string()))
}

/// Whether `line` can come before a dump's first stack: the symbol section (`--- symbol`,
/// `binary=`, `0x… name`, `---`), `--- heap`, the header and its thread lines, comments, jeprof's
/// `%` lines, blank lines. Anything else (a stack, the memory map, text that is no dump, a device's
/// endless bytes) ends the front.
fn is_front_line(line: &[u8]) -> bool {
    use crate::syntax::{BINARY, COMMENT, FORMAT, MARKER};
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.iter().all(u8::is_ascii_whitespace)
        || line.starts_with(b"--- symbol")
        || line.starts_with(b"--- heap")
        || line == MARKER.as_bytes()
        || line.starts_with(BINARY.as_bytes())
        || line.starts_with(b"0x")
        || line.starts_with(FORMAT.as_bytes())
        || line.starts_with(b"heap profile:")
        || line.starts_with(b"  t")
        || line.starts_with(&[COMMENT as u8])
        || line.starts_with(b"%")
}

/// The longest line [`scan_labels`] reads at once (the reader's limit, 16 MiB).
pub const SCAN_LINE: u64 = 16 << 20;

/// The labels of a dump, read from its front only: its lines up to the first stack (`@`), where
/// the writer puts them and the reader requires them (a line that cannot come before a stack ends
/// the front). For tools that must know every dump's process and time before reading any whole
/// (`report`, `merge` and `export` choosing each process's latest dump, or counting the dumps of
/// each): a few lines per dump, not the dump. Lines that are not well-formed labels are skipped
/// here; the full read reports them. Lines are read at most [`SCAN_LINE`] bytes at a time.
pub fn scan_labels(mut input: impl std::io::BufRead) -> std::io::Result<Vec<(String, String)>> {
    use std::io::{BufRead as _, Read as _};
    let mut labels = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if (&mut input).take(SCAN_LINE).read_until(b'\n', &mut line)? == 0 {
            return Ok(labels);
        }
        if !is_front_line(&line) {
            return Ok(labels);
        }
        let rest = line.strip_prefix(LINE_PREFIX.as_bytes());
        let text = rest.and_then(|r| std::str::from_utf8(r).ok());
        if let Some(Ok((key, value))) = text.map(|t| parse_line(t.trim_end_matches(['\n', '\r']))) {
            if get(&labels, &key).is_none() {
                labels.push((key, value));
            }
        }
    }
}

/// `time` as RFC 3339 in UTC to the microsecond (`2026-11-24T08:30:00.250000Z`); times before 1970
/// are written as 1970-01-01T00:00:00.000000Z. Sub-second, so that a series of dumps taken within
/// one second still orders by time (`jeprof-compat leaks`).
///
/// Written with `std` arithmetic (the civil-from-days conversion below) rather than a date crate:
/// the shim calls it while writing a dump, under the allocator, and it is a dozen lines.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Parses an RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `t`/`z`/space
/// accepted as RFC 3339 allows) into microseconds since 1970-01-01T00:00:00Z; the fraction is
/// truncated to microseconds. `None` if it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0i64, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let sep = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > month_days[(month - 1) as usize]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if sep(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 6 {
                micros = micros * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..6 {
            micros *= 10;
        }
    }
    let offset_secs = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        &sign @ (b'+' | b'-') if i + 6 == b.len() && sep(i + 3, b":") => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let offset = h * 3600 + m * 60;
            if sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_secs;
    Some(secs * 1_000_000 + micros)
}

/// [`parse_rfc3339`] as a `SystemTime`; `None` before 1970.
pub fn parse_rfc3339_time(text: &str) -> Option<SystemTime> {
    let micros = u64::try_from(parse_rfc3339(text)?).ok()?;
    Some(UNIX_EPOCH + Duration::from_micros(micros))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_labels_reads_the_front_of_a_dump_and_stops_at_the_first_stack() {
        let dump = b"heap_v2/524288\n# jeprof-shim 1\n# label pid 42\n# label time 2026-11-24T08:30:00.000000Z\n  t*: 1: 8 [0: 0]\n# label b@d x\n@ 0x1\n# label late 1\n";
        let labels = scan_labels(&dump[..]).expect("in memory");
        assert_eq!(
            labels,
            [
                ("pid".to_string(), "42".to_string()),
                (
                    "time".to_string(),
                    "2026-11-24T08:30:00.000000Z".to_string()
                ),
            ]
        );
        assert!(scan_labels(&b"heap_v2/1\n  t*: 0: 0 [0: 0]\n"[..])
            .expect("memory")
            .is_empty());
    }

    #[test]
    fn rfc3339_formats_known_moments_and_parses_them_back() {
        for (micros, text) in [
            (0i64, "1970-01-01T00:00:00.000000Z"),
            (951_782_400_000_000, "2000-02-29T00:00:00.000000Z"),
            (1_795_509_000_250_000, "2026-11-24T08:30:00.250000Z"),
            (4_107_542_399_999_999, "2100-02-28T23:59:59.999999Z"),
        ] {
            let time = UNIX_EPOCH + Duration::from_micros(micros as u64);
            assert_eq!(rfc3339_utc(time), text);
            assert_eq!(parse_rfc3339(text), Some(micros), "{text}");
        }
        // Every day over four centuries round-trips through the two conversions.
        for day in -200_000..200_000 {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
    }

    #[test]
    fn rfc3339_parsing_applies_offsets_and_fractions_and_refuses_what_is_not_one() {
        let base = parse_rfc3339("2026-11-24T08:30:00Z").unwrap();
        assert_eq!(parse_rfc3339("2026-11-24T09:30:00+01:00"), Some(base));
        assert_eq!(parse_rfc3339("2026-11-24t03:00:00-05:30"), Some(base));
        assert_eq!(
            parse_rfc3339("2026-11-24 08:30:00.25z"),
            Some(base + 250_000)
        );
        assert_eq!(
            parse_rfc3339("2026-11-24T08:30:00.1234567Z"),
            Some(base + 123_456)
        );
        for bad in [
            "",
            "2026-11-24",
            "2026-11-24T08:30:00",
            "2026-11-24T08:30:00ZZ",
            "2026-02-29T08:30:00Z",
            "2026-13-01T08:30:00Z",
            "2026-11-24T24:00:00Z",
            "2026-11-24T08:30:00.Z",
            "2026-11-24T08:30:00+1:00",
            "2026-11-24T08:30:00+01:60",
            "２026-11-24T08:30:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_bad_key_a_line_break_or_a_repeated_key_is_refused_with_the_label_named() {
        let labels: Vec<(String, String)> = vec![("ok.key-1_x".into(), "  any text ß  ".into())];
        assert!(validate(&labels).is_ok());
        for (labels, want) in [
            (vec![("".into(), "v".into())], "must not be empty"),
            (vec![("a b".into(), "v".into())], "only ASCII letters"),
            (vec![("k=v".into(), "v".into())], "only ASCII letters"),
            (vec![("k".into(), "a\nb".into())], "line break"),
            (vec![("k".into(), "a\rb".into())], "line break"),
            (
                vec![("k".into(), "1".into()), ("k".into(), "2".into())],
                "unique",
            ),
        ] {
            let err = validate(&labels).expect_err("refused").to_string();
            assert!(err.contains(want) && err.contains("label \""), "{err}");
        }
    }

    #[test]
    fn set_replaces_in_place_and_appends_new_keys() {
        let mut labels = vec![("a".to_string(), "1".to_string()), ("b".into(), "2".into())];
        set(&mut labels, "a", "3");
        set(&mut labels, "c", "4");
        assert_eq!(
            labels,
            [
                ("a".into(), "3".into()),
                ("b".into(), "2".into()),
                ("c".into(), "4".into())
            ]
        );
        assert_eq!(get(&labels, "c"), Some("4"));
        assert_eq!(get(&labels, "d"), None);
    }
}
