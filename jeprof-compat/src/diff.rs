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
use std::io;
use std::path::Path;

use jeprof_dumpfmt::math::Z_95;

use crate::error::Error;
use crate::input::ReadPolicy;
use crate::report::{
    build_file_pair, units, unparse, FunctionName, PairedSums, Report, ReportOptions,
};
use crate::symbolize::SymbolizeOptions;

/// One function's change, with its 95% interval.
pub use jeprof_dumpfmt::math::Change;

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

/// Formats a diff: a totals line, the legend, the header, then one row per function
/// (`change ±95% base new [*] function`, `*` marking a significant change).
pub fn format(base: &Report, new: &Report, changes: &[Change], options: &ReportOptions) -> String {
    let mut out = Vec::new();
    let rows = changes
        .iter()
        .map(|c| (FunctionName::Text(&c.name), figures_of(c)));
    // Writing to a `Vec` cannot fail, and every name is a `String`: the text is UTF-8.
    let _ = write_diff(
        (base.total, base.total_variance),
        (new.total, new.total_variance),
        rows,
        options,
        &mut out,
    );
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A change's figures: base, new, delta, half-width.
type Figures = [f64; 4];

/// `change`'s figures in [`Figures`]' order.
fn figures_of(change: &Change) -> Figures {
    [change.base, change.new, change.delta, change.half_width]
}

/// [`format()`] of a diff given as each side's total with its variance and the changes in
/// [`compare`]'s order, written to `out` as it goes.
fn write_diff<'a>(
    (base_total, base_variance): (f64, f64),
    (new_total, new_variance): (f64, f64),
    changes: impl Iterator<Item = (FunctionName<'a>, Figures)>,
    options: &ReportOptions,
    mut out: impl io::Write,
) -> io::Result<()> {
    let (m, b) = (options.measure, options.show_bytes);
    let delta = new_total - base_total;
    let half = Z_95 * (base_variance + new_variance).max(0.0).sqrt();
    writeln!(
        out,
        "Total: base {} {u}, new {} {u}, change {} ± {} {u}{}",
        unparse(base_total, m, b),
        unparse(new_total, m, b),
        signed(delta, options),
        unparse(half, m, b),
        if delta.abs() > half {
            " (significant)"
        } else {
            ""
        },
        u = units(m, b),
    )?;
    writeln!(
        out,
        "(± is the 95% interval of a change; * marks a significant one)\n{:>9} {:>9} {:>9} {:>9} {:>3} function",
        "change", "±95%", "base", "new", "sig"
    )?;
    for (printed, (name, [base, new, delta, half_width])) in changes.enumerate() {
        if options.nodecount.is_some_and(|n| printed >= n) {
            break;
        }
        writeln!(
            out,
            "{:>9} {:>9} {:>9} {:>9} {:>3} {}",
            signed(delta, options),
            unparse(half_width, m, b),
            unparse(base, m, b),
            unparse(new, m, b),
            if delta.abs() > half_width { "*" } else { "" },
            name
        )?;
    }
    Ok(())
}

/// A diff of two dump files ([`compare_files`]): each function's figures on both sides, and the
/// changes in [`compare`]'s order.
pub struct FileDiff {
    sums: PairedSums,
    cumulative: bool,
    /// Function ids of the changes, sorted.
    changes: Vec<u32>,
}

/// [`compare`] of the reports of two dump files, read one stack at a time and one after the other
/// ([`crate::report::build_files`]'s reading): memory holds each function's name once and, per
/// side, the one figure compared and its variance, never a dump's stacks. Errors name the file
/// (and line).
pub fn compare_files(
    base: &Path,
    new: &Path,
    cumulative: bool,
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<FileDiff, Error> {
    let sums = build_file_pair(base, new, cumulative, symbolize, options, policy)?;
    let figures = |id: u32| change_figures(&sums, id, cumulative);
    let mut changes: Vec<u32> = (0..sums.functions() as u32)
        .filter(|&id| {
            let [base, new, ..] = figures(id);
            base != 0.0 || new != 0.0
        })
        .collect();
    // `compare` starts from name order; from any other, a NaN change (which compares equal to
    // everything) could end up elsewhere.
    if changes.iter().any(|&id| figures(id)[2].is_nan()) {
        changes.sort_by(|&a, &b| sums.name(a).cmp(&sums.name(b)));
    }
    changes.sort_by(|&a, &b| {
        let (da, db) = (figures(a)[2], figures(b)[2]);
        db.abs()
            .partial_cmp(&da.abs())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| sums.name(a).cmp(&sums.name(b)))
    });
    Ok(FileDiff {
        sums,
        cumulative,
        changes,
    })
}

/// Function `id`'s base, new, delta and half-width, as [`compare`] computes them.
fn change_figures(sums: &PairedSums, id: u32, cumulative: bool) -> Figures {
    let (base, base_variance) = sums.base.figure(id, cumulative);
    let (new, new_variance) = sums.new.figure(id, cumulative);
    let half_width = Z_95 * (base_variance + new_variance).max(0.0).sqrt();
    [base, new, new - base, half_width]
}

impl FileDiff {
    /// The changes ([`compare`]'s).
    pub fn changes(&self) -> impl ExactSizeIterator<Item = Change> + '_ {
        self.changes.iter().map(|&id| {
            let [base, new, delta, half_width] = change_figures(&self.sums, id, self.cumulative);
            Change {
                name: self.sums.name(id).to_string(),
                base,
                new,
                delta,
                half_width,
            }
        })
    }

    /// Whether either side's report prints a figure through Perl's `%d` that it cannot hold
    /// ([`crate::report::prints_perl_overflow`] of either).
    pub fn prints_perl_overflow(&self, options: &ReportOptions) -> bool {
        self.sums.base.prints_perl_overflow(options) || self.sums.new.prints_perl_overflow(options)
    }

    /// Writes the diff as [`format()`] formats it.
    pub fn write(&self, options: &ReportOptions, out: impl io::Write) -> io::Result<()> {
        let rows = self.changes.iter().map(|&id| {
            (
                self.sums.name(id),
                change_figures(&self.sums, id, self.cumulative),
            )
        });
        write_diff(
            self.sums.base.total(),
            self.sums.new.total(),
            rows,
            options,
            out,
        )
    }
}
