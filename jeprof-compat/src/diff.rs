//! `diff BASE NEW`: per function, how much the figure changed, with a 95% interval, and whether the
//! change is larger than sampling noise.
//!
//! Each side is a report ([`crate::report::build`]) of its dumps added up; for every function the
//! change is `new − base` and its variance is `var(new) + var(base)`, treating the two sides as
//! independent samples. Two dumps of one process share the allocations that were sampled before the
//! first dump and are still live, which makes the two estimates positively correlated; ignoring that
//! *overstates* the variance of the change, so the interval is conservative (a flagged change is real
//! at least at the stated level; some real small changes go unflagged).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jeprof_dumpfmt::math::Z_95;

use crate::report::{units, unparse, Report, ReportOptions};

/// One function's change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The function.
    pub name: String,
    /// Its figure in BASE.
    pub base: f64,
    /// Its figure in NEW.
    pub new: f64,
    /// `new − base`.
    pub delta: f64,
    /// Half-width of the 95% interval of `delta`.
    pub half_width: f64,
}

impl Change {
    /// True when the 95% interval of the change excludes zero.
    pub fn significant(&self) -> bool {
        self.delta.abs() > self.half_width
    }
}

/// Compares two reports function by function, by `cum` figures when `cumulative`, else by flat.
/// Sorted by the size of the change, largest first, then name.
pub fn compare(base: &Report, new: &Report, cumulative: bool) -> Vec<Change> {
    let mut table: BTreeMap<&str, [f64; 4]> = BTreeMap::new();
    for (side, report) in [(0usize, base), (1, new)] {
        for row in &report.rows {
            let (v, var) = if cumulative {
                (row.cum, row.cum_variance)
            } else {
                (row.flat, row.flat_variance)
            };
            let e = table.entry(row.name.as_str()).or_default();
            e[side] += v;
            e[2 + side] += var;
        }
    }
    let mut changes: Vec<Change> = table
        .into_iter()
        .map(|(name, [b, n, vb, vn])| Change {
            name: name.to_string(),
            base: b,
            new: n,
            delta: n - b,
            half_width: Z_95 * (vb + vn).max(0.0).sqrt(),
        })
        .filter(|c| c.base != 0.0 || c.new != 0.0)
        .collect();
    changes.sort_by(|a, b| {
        b.delta
            .abs()
            .partial_cmp(&a.delta.abs())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.name.cmp(&b.name))
    });
    changes
}

fn signed(x: f64, options: &ReportOptions) -> String {
    let s = unparse(x, options.measure, options.show_bytes);
    if x >= 0.0 && !s.starts_with('-') {
        format!("+{s}")
    } else {
        s
    }
}

/// Formats a diff: a totals line, then one row per function
/// (`change ±95% base new [*] function`, `*` marking a significant change).
pub fn format(base: &Report, new: &Report, changes: &[Change], options: &ReportOptions) -> String {
    let (m, b) = (options.measure, options.show_bytes);
    let mut out = String::new();
    let delta = new.total - base.total;
    let half = Z_95 * (base.total_variance + new.total_variance).max(0.0).sqrt();
    let _ = writeln!(
        out,
        "Total: base {} {u}, new {} {u}, change {} ± {} {u}{}",
        unparse(base.total, m, b),
        unparse(new.total, m, b),
        signed(delta, options),
        unparse(half, m, b),
        if delta.abs() > half {
            " (significant)"
        } else {
            ""
        },
        u = units(m, b),
    );
    let _ = writeln!(
        out,
        "{:>9} {:>9} {:>9} {:>9} {:>3} function   (± is the 95% interval of the change; * = significant)",
        "change", "±95%", "base", "new", "sig"
    );
    for (printed, c) in changes.iter().enumerate() {
        if options.nodecount.is_some_and(|n| printed >= n) {
            break;
        }
        let _ = writeln!(
            out,
            "{:>9} {:>9} {:>9} {:>9} {:>3} {}",
            signed(c.delta, options),
            unparse(c.half_width, m, b),
            unparse(c.base, m, b),
            unparse(c.new, m, b),
            if c.significant() { "*" } else { "" },
            c.name
        );
    }
    out
}
