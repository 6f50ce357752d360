//! A report's vocabulary: which figure it shows ([`Measure`]), how it is asked for
//! ([`ReportOptions`]), and what it holds ([`Report`] and its [`FunctionFigures`]; borrowed from a
//! [`super::FunctionTable`], [`Row`] and [`FunctionName`]).

use jeprof_dumpfmt::{Counts, Estimate};
use regex::Regex;

use super::filters::StackFilters;
use crate::attribution::Attribution;
use crate::names::SkipRules;

/// Which of a stack's four figures a report shows (jeprof's `--inuse_space` etc.).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Measure {
    /// Live bytes (the default).
    #[default]
    InuseSpace,
    /// Live objects.
    InuseObjects,
    /// Bytes allocated since the start.
    AllocSpace,
    /// Objects allocated since the start.
    AllocObjects,
}

impl Measure {
    /// The figure and its variance.
    pub fn pick(self, counts: &Counts) -> (f64, f64) {
        let e: &Estimate = match self {
            Measure::InuseSpace | Measure::InuseObjects => &counts.inuse,
            Measure::AllocSpace | Measure::AllocObjects => &counts.accum,
        };
        if self.is_objects() {
            (e.objects, e.objects_variance)
        } else {
            (e.bytes, e.bytes_variance)
        }
    }

    /// True for the object counts.
    pub fn is_objects(self) -> bool {
        matches!(self, Measure::InuseObjects | Measure::AllocObjects)
    }

    /// The name pprof and the flame graph title use.
    pub fn name(self) -> &'static str {
        match self {
            Measure::InuseSpace => "inuse_space",
            Measure::InuseObjects => "inuse_objects",
            Measure::AllocSpace => "alloc_space",
            Measure::AllocObjects => "alloc_objects",
        }
    }
}

/// What a report shows and how.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Which figure.
    pub measure: Measure,
    /// Bytes as integers (`B`) rather than `MB` with one decimal.
    pub show_bytes: bool,
    /// Keep only stacks with a frame whose address or function matches.
    pub focus: Option<Regex>,
    /// Which allocator frames to remove.
    pub skip: SkipRules,
    /// Print at most this many rows (jeprof's `--text` prints them all).
    pub nodecount: Option<usize>,
    /// Add each function's 95% confidence interval.
    pub interval: bool,
    /// Which function of a stack is charged with flat, and which are shown; the default is
    /// jeprof's charging.
    pub attribution: Attribution,
    /// Sort rows by cum rather than flat (jeprof's `--cum`).
    pub sort_by_cum: bool,
    /// `--ignore`, `--retain`, `--exclude`.
    pub filters: StackFilters,
    /// `--lines`: a row per function and source line (`name file:line`) rather than per
    /// function ([`crate::report::lines`]).
    pub lines: bool,
}

/// One function's figures: flat (allocated directly in it) and cum (it or its callees), each with
/// the variance of its estimate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionFigures {
    /// The function as the report prints it.
    pub name: String,
    /// Sum over the stacks whose first remaining function this is.
    pub flat: f64,
    /// Sum over the stacks it appears in (once per stack).
    pub cum: f64,
    /// Variance of `flat`: the sum of those stacks' variances (stacks are independent samples).
    pub flat_variance: f64,
    /// Variance of `cum`, likewise.
    pub cum_variance: f64,
}

/// A computed text report.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Sum of every entry, before frames are removed or focus applied (the `Total:` line).
    pub total: f64,
    /// Variance of `total`.
    pub total_variance: f64,
    /// Sum of flat figures after filtering: what percentages are relative to.
    pub shown_total: f64,
    /// Functions, sorted as jeprof sorts them.
    pub rows: Vec<FunctionFigures>,
}

/// A function's name as a report holds it: spelled out, or an address nothing names, which jeprof
/// prints as its 16 hex digits (after `0x` when a program or library was looked in). Equal when
/// they print the same, whatever their form.
#[derive(Debug, Clone, Copy)]
pub enum FunctionName<'a> {
    /// A name spelled out.
    Text(&'a str),
    /// An address nothing names.
    Unnamed {
        /// The address (the lookup key).
        key: u64,
        /// Printed after `0x`.
        prefixed: bool,
    },
}

impl<'a> FunctionName<'a> {
    /// The name's text; `buffer` holds an address's.
    pub(super) fn bytes<'b>(&self, buffer: &'b mut [u8; 18]) -> &'b [u8]
    where
        'a: 'b,
    {
        match *self {
            FunctionName::Text(text) => text.as_bytes(),
            FunctionName::Unnamed { key, prefixed } => {
                // `{key:016x}`, without the formatting machinery: names are hashed and compared
                // millions of times.
                const DIGITS: &[u8; 16] = b"0123456789abcdef";
                let start = if prefixed { 0 } else { 2 };
                buffer[..2].copy_from_slice(b"0x");
                for (i, digit) in buffer[2..].iter_mut().enumerate() {
                    *digit = DIGITS[((key >> (60 - 4 * i)) & 0xf) as usize];
                }
                &buffer[start..]
            }
        }
    }
}

impl std::fmt::Display for FunctionName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            FunctionName::Text(text) => f.write_str(text),
            // As [`unnamed`] spells it, without a `String` per row printed.
            FunctionName::Unnamed {
                key,
                prefixed: true,
            } => write!(f, "0x{key:016x}"),
            FunctionName::Unnamed {
                key,
                prefixed: false,
            } => write!(f, "{key:016x}"),
        }
    }
}

impl PartialEq for FunctionName<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for FunctionName<'_> {}

impl PartialOrd for FunctionName<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FunctionName<'_> {
    /// As their printed names compare.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (*self, *other) {
            // Same width, same prefix, lowercase hex: the text orders as the number.
            (
                FunctionName::Unnamed {
                    key: a,
                    prefixed: p,
                },
                FunctionName::Unnamed {
                    key: b,
                    prefixed: q,
                },
            ) if p == q => a.cmp(&b),
            (a, b) => a.bytes(&mut [0; 18]).cmp(b.bytes(&mut [0; 18])),
        }
    }
}

/// One function's figures in a [`FunctionTable`](super::FunctionTable) ([`FunctionFigures`],
/// borrowed). A figure the table does not keep (the variances, unless asked for) reads as zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row<'a> {
    /// The function as the report prints it.
    pub name: FunctionName<'a>,
    /// Sum over the stacks whose first remaining function this is.
    pub flat: f64,
    /// Sum over the stacks it appears in (once per stack).
    pub cum: f64,
    /// Variance of `flat`.
    pub flat_variance: f64,
    /// Variance of `cum`.
    pub cum_variance: f64,
}

impl Row<'_> {
    /// The row as a [`Report`] holds it.
    pub fn to_figures(&self) -> FunctionFigures {
        FunctionFigures {
            name: self.name.to_string(),
            flat: self.flat,
            cum: self.cum,
            flat_variance: self.flat_variance,
            cum_variance: self.cum_variance,
        }
    }
}

impl<'a> From<&'a FunctionFigures> for Row<'a> {
    fn from(f: &'a FunctionFigures) -> Row<'a> {
        Row {
            name: FunctionName::Text(&f.name),
            flat: f.flat,
            cum: f.cum,
            flat_variance: f.flat_variance,
            cum_variance: f.cum_variance,
        }
    }
}
