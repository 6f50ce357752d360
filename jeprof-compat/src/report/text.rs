//! jeprof's number formatting (`Unparse`, `Units`, `Percent`, Perl's `%d`) and the `--text`
//! report's layout, plus our interval columns.

use std::io;

use super::model::{Measure, Report, ReportOptions, Row};

/// Perl's `sprintf("%d", $x)` for a double: truncation toward zero, with Perl's conversions past the
/// 64-bit range (≥ 2^63 prints negative, ≥ 2^64 prints -1).
pub fn perl_int(x: f64) -> String {
    if x.is_nan() {
        return "-1".to_string();
    }
    if x >= 18_446_744_073_709_551_616.0 {
        return "-1".to_string();
    }
    if x >= 9_223_372_036_854_775_808.0 {
        return ((x as u64) as i64).to_string();
    }
    if x <= -9_223_372_036_854_775_808.0 {
        return i64::MIN.to_string();
    }
    (x.trunc() as i64).to_string()
}

/// jeprof's `Unparse` for heap profiles.
pub fn unparse(x: f64, measure: Measure, show_bytes: bool) -> String {
    if measure.is_objects() || show_bytes {
        perl_int(x)
    } else {
        format!("{:.1}", x / 1_048_576.0)
    }
}

/// A figure as a number, never wrapped as Perl's `%d` wraps it: integers past 2^63 print in full,
/// and infinities as `inf` (the interval columns, which jeprof does not print).
pub fn plain_figure(x: f64, measure: Measure, show_bytes: bool) -> String {
    if !x.is_finite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if measure.is_objects() || show_bytes {
        format!("{:.0}", x.trunc())
    } else {
        format!("{:.1}", x / 1_048_576.0)
    }
}

/// Whether [`format_text`] prints a figure through Perl's `%d` that it cannot hold (2^63 or more,
/// or not finite), so that it comes out negative or -1 as in jeprof.
pub fn prints_perl_overflow(report: &Report, options: &ReportOptions) -> bool {
    prints_integers(options)
        && (wraps_in_perl(report.total)
            || report
                .rows
                .iter()
                .any(|r| wraps_in_perl(r.flat) || wraps_in_perl(r.cum)))
}

/// Whether the text report prints its figures through Perl's `%d` ([`unparse`]).
pub(super) fn prints_integers(options: &ReportOptions) -> bool {
    options.measure.is_objects() || options.show_bytes
}

/// Whether Perl's `%d` ([`perl_int`]) cannot print `x` as it is: not finite, or 2^63 and more.
pub(super) fn wraps_in_perl(x: f64) -> bool {
    !x.is_finite() || x.abs() >= 9_223_372_036_854_775_808.0
}

/// jeprof's `Units`.
pub fn units(measure: Measure, show_bytes: bool) -> &'static str {
    if measure.is_objects() {
        "objects"
    } else if show_bytes {
        "B"
    } else {
        "MB"
    }
}

/// jeprof's `Percent`.
pub fn percent(x: f64, total: f64) -> String {
    if total != 0.0 {
        format!("{:.1}%", x * 100.0 / total)
    } else if x == 0.0 {
        "nan".to_string()
    } else if x > 0.0 {
        "+inf".to_string()
    } else {
        "-inf".to_string()
    }
}

/// Formats `report` exactly as `jeprof --text` prints it (plus interval columns on request).
pub fn format_text(report: &Report, options: &ReportOptions) -> String {
    let mut out = Vec::new();
    let rows = report.rows.iter().map(Row::from);
    // Writing to a `Vec` cannot fail, and every name is a `String`: the text is UTF-8.
    let _ = write_text(report.total, report.shown_total, rows, options, &mut out);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// [`format_text`] of a report given as its totals and its rows in jeprof's order, written to
/// `out` as it goes.
pub(super) fn write_text<'a>(
    total: f64,
    shown_total: f64,
    rows: impl Iterator<Item = Row<'a>>,
    options: &ReportOptions,
    mut out: impl io::Write,
) -> io::Result<()> {
    let (m, b) = (options.measure, options.show_bytes);
    if total != 0.0 {
        writeln!(out, "Total: {} {}", unparse(total, m, b), units(m, b))?;
    }
    // The intervals are ours, not jeprof's: printed as the numbers they are (no Perl `%d`
    // wrap-around), and `inf` where a variance overflowed.
    let interval = |value: f64, variance: f64| {
        let (lo, hi) = jeprof_dumpfmt::math::confidence_interval_95(value, variance);
        format!("[{}, {}]", plain_figure(lo, m, b), plain_figure(hi, m, b))
    };
    let mut running = 0.0;
    let mut printed = 0usize;
    for row in rows {
        running += row.flat;
        if row.flat == 0.0 && row.cum == 0.0 {
            continue;
        }
        if options.nodecount.is_some_and(|n| printed >= n) {
            break;
        }
        printed += 1;
        write!(
            out,
            "{:>8} {:>6} {:>6} {:>8} {:>6} ",
            unparse(row.flat, m, b),
            percent(row.flat, shown_total),
            percent(running, shown_total),
            unparse(row.cum, m, b),
            percent(row.cum, shown_total),
        )?;
        if options.interval {
            write!(
                out,
                "{:>21} {:>21} ",
                interval(row.flat, row.flat_variance),
                interval(row.cum, row.cum_variance)
            )?;
        }
        writeln!(out, "{}", row.name)?;
    }
    Ok(())
}

/// The header line `format_text` prints above interval columns, for `--interval`.
pub fn interval_legend() -> &'static str {
    "# columns: flat flat% sum% cum cum% [flat 95% interval] [cum 95% interval] function\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_int_truncates_and_wraps_like_perl() {
        assert_eq!(perl_int(2161886.25), "2161886");
        assert_eq!(perl_int(-0.9), "0");
        assert_eq!(perl_int(6.665), "6");
        assert_eq!(perl_int(1.8446744073709552e19), "-1");
    }

    #[test]
    fn unparse_and_percent_match_jeprof() {
        assert_eq!(unparse(2161886.25, Measure::InuseSpace, false), "2.1");
        assert_eq!(percent(1332474.0, 2161886.25), "61.6%");
        assert_eq!(percent(0.0, 0.0), "nan");
        assert_eq!(percent(-1.0, 0.0), "-inf");
    }
}
