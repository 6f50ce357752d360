//! Comment lines of the body, which jeprof skips: labels, annotations (the sample period among
//! them), and a stack's `# var` figures. A comment is known by its word after `#` and blanks
//! ([`syntax::COMMENT_WORDS`]).

use super::classify::{after_word_bytes, trim_start};
use super::errors::malformed;
use crate::error::Error;
use crate::model::Profile;
use crate::syntax;

/// What follows `# label ` on a label line (`raw` as read, whose value is the rest of the line
/// verbatim). The word is found as every other comment's is (after `#` and any blanks): were
/// `#label k v` an annotation here, written back as `# label k v: …` it would read as a label.
pub(super) fn label_rest(raw: &[u8]) -> Option<&[u8]> {
    let after_hash = trim_start(&trim_start(raw)[1..]);
    after_word_bytes(after_hash, syntax::LABEL)
}

/// A `# label <key> <value>` line (`rest` follows `# label `), added to `profile.labels`. Labels
/// come before the first stack, so that a streaming reader has them all with the first stack.
pub(super) fn read_label(
    no: usize,
    raw: &[u8],
    rest: &[u8],
    profile: &mut Profile,
    after_a_stack: bool,
) -> Result<(), Error> {
    if after_a_stack {
        return Err(malformed(
            no,
            raw,
            "`# label` lines only before the first `@` stack line",
        ));
    }
    let text = std::str::from_utf8(rest)
        .map_err(|_| malformed(no, raw, "a UTF-8 label `# label <key> <value>`"))?;
    let (key, value) = crate::labels::parse_line(text).map_err(|problem| {
        malformed(
            no,
            raw,
            &format!("a label `# label <key> <value>` ({problem})"),
        )
    })?;
    if profile.labels.iter().any(|(k, _)| *k == key) {
        return Err(malformed(
            no,
            raw,
            &format!("each label key once (`{key}` is repeated)"),
        ));
    }
    profile.labels.push((key, value));
    Ok(())
}

/// The key and value of an annotation `# <key>: <value>` (`text` follows the `#`), trimmed.
pub(super) fn split_annotation(text: &str) -> Option<(&str, &str)> {
    let (k, v) = text.split_once(syntax::ANNOTATION_SEPARATOR)?;
    Some((k.trim(), v.trim()))
}

/// The four figures of a `# var` line, each finite and not negative.
pub(super) fn parse_variance(text: &str) -> Option<[f64; 4]> {
    let mut out = [0.0; 4];
    let mut it = text.split_ascii_whitespace();
    for slot in &mut out {
        let v: f64 = it.next()?.parse().ok()?;
        if !v.is_finite() || v < 0.0 {
            return None;
        }
        *slot = v;
    }
    it.next().is_none().then_some(out)
}

/// A dump whose header period was chosen for rounding records the sampling period in a
/// `sample_period` annotation: that is the profile's period. Annotations come before the first
/// stack, so this is final once a stack is seen.
pub(super) fn take_sample_period(profile: &mut Profile) {
    if let Some(i) = profile
        .annotations
        .iter()
        .position(|(k, _)| k == syntax::SAMPLE_PERIOD)
    {
        if let Ok(period) = profile.annotations[i].1.parse::<u64>() {
            profile.sample_period = period;
            profile.annotations.remove(i);
        }
    }
}
