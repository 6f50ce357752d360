//! Per-scope figures of a profile ([`Profile::scopes`]): a scope's own profile, and each scope's
//! totals.
//!
//! A producer that records which scope (a query, a tenant, a module) each sample was allocated in
//! attaches, per stack, the in-use figures of each scope there. In a heap_v2 dump they follow the
//! stack's counts as comment lines, which jeprof and other readers skip:
//!
//! ```text
//! @ 0x… 0x…
//!   t*: …
//!   # var …
//!   # scope <objects> <bytes> <objects variance> <bytes variance> <label>
//! ```
//!
//! The label is the rest of the line (control characters written as U+FFFD). Only in-use figures:
//! what was allocated per scope and stack is not kept by the shim.

use std::collections::BTreeMap;

use crate::model::{Counts, Estimate, Profile, Stack};

/// The profile of one scope: its in-use figures per stack (no accumulated figures, no per-thread
/// lines), everything else (period, symbols, maps, annotations, labels) as in `profile`. Empty stacks when
/// the profile has no figures for `label`.
pub fn scope_profile(profile: &Profile, label: &str) -> Profile {
    let mut out = Profile::new(profile.sample_period);
    out.symbols = profile.symbols.clone();
    out.mapped_libraries = profile.mapped_libraries.clone();
    out.annotations = profile.annotations.clone();
    out.labels = profile.labels.clone();
    out.annotations.push(("scope".into(), label.to_string()));
    for s in profile.scopes.iter().filter(|s| s.scope == label) {
        out.stacks.push(Stack {
            frames: s.frames.clone(),
            counts: Counts {
                inuse: s.inuse,
                accum: Estimate::default(),
            },
            threads: Vec::new(),
        });
    }
    out.scopes = profile
        .scopes
        .iter()
        .filter(|s| s.scope == label)
        .cloned()
        .collect();
    out
}

/// Each scope's in-use totals over its stacks, by label.
pub fn scope_totals(profile: &Profile) -> BTreeMap<String, Estimate> {
    let mut totals: BTreeMap<String, Estimate> = BTreeMap::new();
    for s in &profile.scopes {
        totals.entry(s.scope.clone()).or_default().add(&s.inuse);
    }
    totals
}

/// A label as written on a `# scope` line: control characters (a newline would end the line)
/// replaced by U+FFFD.
pub(crate) fn written_label(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect()
}

/// Parses what follows `# scope `: four reals, then the label. `None` if malformed.
pub(crate) fn parse_scope_line(rest: &str) -> Option<(Estimate, String)> {
    let mut fields = rest.trim_start().splitn(5, ' ');
    let mut real = || -> Option<f64> {
        let v: f64 = fields.next()?.parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    let estimate = Estimate {
        objects: real()?,
        bytes: real()?,
        objects_variance: real()?,
        bytes_variance: real()?,
    };
    let label = fields.next()?.trim();
    (!label.is_empty()).then(|| (estimate, label.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_line_parses_back_its_figures_and_a_label_with_spaces() {
        let (e, label) = parse_scope_line("2e0 1.5e3 1e0 2e6 tenant 42").unwrap();
        assert_eq!(label, "tenant 42");
        assert_eq!((e.objects, e.bytes, e.bytes_variance), (2.0, 1500.0, 2e6));
        assert!(parse_scope_line("2 1500 1").is_none());
        assert!(parse_scope_line("2 1500 1 1").is_none());
        assert!(parse_scope_line("-2 1500 1 1 x").is_none());
        assert_eq!(written_label("a\nb"), "a\u{FFFD}b");
    }
}
