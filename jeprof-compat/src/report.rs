//! jeprof's `--text` and `--collapsed` reports, and flame graphs, from resolved profiles.
//!
//! The text report follows jeprof 5.3.1's `FilterAndPrint` step by step (`docs/design.md` §5, §6):
//! 1. `Total:` is the sum of every entry, before anything is removed.
//! 2. `RemoveUninterestingFrames`: walking each stack from the leaf, a frame whose function is an
//!    allocator function throws away itself and every frame seen so far.
//! 3. `--focus`: keep the stacks with a frame whose address or name matches.
//! 4. `TranslateStack`: addresses above `0x7fffffffffffffff` are dropped; an address with inlined
//!    functions becomes one entry per function, innermost first, all but the outermost suffixed
//!    ` (inline)`.
//! 5. `ReduceProfile`: a function is counted once per stack, however often it recurses.
//! 6. flat = the stack's first remaining function, cum = every remaining function; rows sorted by
//!    flat (descending) then name, rows with flat = cum = 0 left out, percentages of the flat total.
//!
//! Figures are `f64` sums of what jeprof computes per entry; jeprof adds them in Perl hash order,
//! which is random, so a figure that lands within a rounding error of an integer (or of a 0.1 MB
//! step) can print one unit apart from one jeprof run to the next.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;

use jeprof_dumpfmt::{Counts, Estimate, Profile};
use regex::Regex;

use crate::hash::FastMap;
use crate::names::{self, SkipRules};
use crate::symbolize::{resolve, Frame, KeyIndex, ResolvedProfile, SymbolizeOptions};

/// Addresses above this (kernel addresses) are dropped by jeprof's `TranslateStack`.
const LAST_USER_ADDRESS: u64 = 0x7fff_ffff_ffff_ffff;

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

/// The frames of a stack that survive `RemoveUninterestingFrames`, innermost first.
pub fn interesting_frames(
    frames: &[std::sync::Arc<Frame>],
    skip: SkipRules,
) -> &[std::sync::Arc<Frame>] {
    // jeprof throws away everything up to and including the *last* allocator frame seen from the leaf.
    match frames
        .iter()
        .rposition(|f| f.symbolized && names::is_uninteresting(f.function(), skip))
    {
        Some(i) => &frames[i + 1..],
        None => frames,
    }
}

fn focus_matches(frames: &[std::sync::Arc<Frame>], focus: &Regex) -> bool {
    frames.iter().any(|f| {
        focus.is_match(&format!("{:016x}", f.key)) || f.names.iter().any(|n| focus.is_match(n))
    })
}

/// Interned function names, and each frame's translated names (`TranslateStack`), computed once per
/// distinct frame.
#[derive(Default)]
struct Translator {
    names: Vec<String>,
    ids: FastMap<String, u32>,
    /// Each distinct frame's dense index into `infos` (one hash lookup per frame of a stack).
    slots: FastMap<*const Frame, u32>,
    /// Per distinct frame: whether it is an allocator frame jeprof removes (a string test, so
    /// cached), and its translated function ids.
    infos: Vec<(bool, Box<[u32]>)>,
}

impl Translator {
    fn intern(&mut self, name: String) -> u32 {
        if let Some(&id) = self.ids.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    /// The dense index of a frame, translating it on first sight.
    fn slot(&mut self, f: &std::sync::Arc<Frame>, skip: SkipRules) -> u32 {
        let key = std::sync::Arc::as_ptr(f);
        if let Some(&slot) = self.slots.get(&key) {
            return slot;
        }
        let slot = self.push_info(&f.names, f.symbolized, f.key, skip);
        self.slots.insert(key, slot);
        slot
    }

    /// Adds the info of a frame with these names (innermost first) at lookup key `key`: whether it
    /// is an allocator frame, and its translated functions; returns its index in `infos`.
    fn push_info<S: AsRef<str>>(
        &mut self,
        names: &[S],
        symbolized: bool,
        key: u64,
        skip: SkipRules,
    ) -> u32 {
        let mut names = names;
        if symbolized && skip.rust_allocator_frames {
            // Rust inlines its allocation shims (and a profiler's `GlobalAlloc`) into the caller,
            // so one address can carry allocator names innermost and the caller's outermost: it
            // belongs to its innermost name that is not an allocator frame.
            while names.len() > 1 && names::is_uninteresting(names[0].as_ref(), skip) {
                names = &names[1..];
            }
        }
        let function = names.last().map_or("", AsRef::as_ref);
        let uninteresting = symbolized && names::is_uninteresting(function, skip);
        let ids = self.translate(names, key);
        self.infos.push((uninteresting, ids));
        (self.infos.len() - 1) as u32
    }

    /// The functions at a frame, innermost first, all but the outermost suffixed ` (inline)`; none
    /// for an address above `0x7fffffffffffffff`, which jeprof drops.
    fn translate<S: AsRef<str>>(&mut self, names: &[S], key: u64) -> Box<[u32]> {
        let mut ids = Vec::with_capacity(names.len());
        if key <= LAST_USER_ADDRESS {
            let last = names.len().saturating_sub(1);
            for (j, n) in names.iter().map(AsRef::as_ref).enumerate() {
                if n.is_empty() {
                    continue;
                }
                let name = if j < last {
                    format!("{n} (inline)")
                } else {
                    n.to_string()
                };
                ids.push(self.intern(name));
            }
        }
        ids.into_boxed_slice()
    }
}

/// The function ids of a stack (given as frame slots, already past [`interesting_frames`]) after
/// `TranslateStack` and `ReduceProfile` (each once), innermost first.
fn reduced_functions(translator: &Translator, slots: &[u32], out: &mut Vec<u32>) {
    out.clear();
    for &s in slots {
        for &id in translator.infos[s as usize].1.iter() {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
}

/// The running state of a text report: figures per interned function.
#[derive(Default)]
struct Builder {
    report: Report,
    translator: Translator,
    table: Vec<FunctionFigures>,
    functions: Vec<u32>,
    slots: Vec<u32>,
}

impl Builder {
    /// Adds one stack whose frames are in `self.slots` (indexes into the translator's `infos`).
    /// `frames` (the same frames) is only read for `--focus`.
    fn add(
        &mut self,
        value: f64,
        variance: f64,
        focus: Option<(&Regex, &[std::sync::Arc<Frame>])>,
    ) {
        self.report.total += value;
        self.report.total_variance += variance;
        let infos = &self.translator.infos;
        // jeprof throws away everything up to and including the *last* allocator frame seen
        // from the leaf ([`interesting_frames`]).
        let cut = self
            .slots
            .iter()
            .rposition(|&s| infos[s as usize].0)
            .map_or(0, |i| i + 1);
        if let Some((focus, frames)) = focus {
            if !focus_matches(&frames[cut..], focus) {
                return;
            }
        }
        reduced_functions(&self.translator, &self.slots[cut..], &mut self.functions);
        if self.table.len() < self.translator.names.len() {
            self.table
                .resize(self.translator.names.len(), FunctionFigures::default());
        }
        for (i, &id) in self.functions.iter().enumerate() {
            let row = &mut self.table[id as usize];
            if i == 0 {
                row.flat += value;
                row.flat_variance += variance;
                self.report.shown_total += value;
            }
            row.cum += value;
            row.cum_variance += variance;
        }
    }

    fn add_profile(&mut self, profile: &ResolvedProfile, options: &ReportOptions) {
        for stack in &profile.stacks {
            let (value, variance) = options.measure.pick(&stack.counts);
            self.slots.clear();
            for f in &stack.frames {
                let slot = self.translator.slot(f, options.skip);
                self.slots.push(slot);
            }
            let focus = options
                .focus
                .as_ref()
                .map(|re| (re, stack.frames.as_slice()));
            self.add(value, variance, focus);
        }
    }

    fn finish(self) -> Report {
        let mut report = self.report;
        let mut rows: Vec<FunctionFigures> = self
            .table
            .into_iter()
            .zip(self.translator.names)
            .map(|(mut f, name)| {
                f.name = name;
                f
            })
            .collect();
        rows.sort_by(|a, b| {
            b.flat
                .partial_cmp(&a.flat)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.name.cmp(&b.name))
        });
        report.rows = rows;
        report
    }
}

/// Computes the text report of `profiles` added together.
pub fn build(profiles: &[ResolvedProfile], options: &ReportOptions) -> Report {
    let mut builder = Builder::default();
    for profile in profiles {
        builder.add_profile(profile, options);
    }
    builder.finish()
}

/// [`build`] straight from parsed dumps (with where each came from, for messages): the same report
/// as `build(&[resolve(..), ..])`, but a dump with a symbol section (without `--focus`) goes from
/// addresses to translated functions without building [`Frame`]s, the way
/// [`crate::merge::Accumulator::add_dump`] does: each distinct address is looked up once per dump,
/// walking the symbol section in its own order, and each distinct entry of raw names is demangled,
/// cleaned, translated and tested against the skip list once per report. Other dumps are resolved.
pub fn build_dumps(
    dumps: &[(Profile, String)],
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
) -> Report {
    let mut builder = Builder::default();
    // A raw entry (as written in the dump) to its index in the translator's `infos`.
    let mut by_raw: FastMap<&[String], u32> = FastMap::default();
    let mut index = KeyIndex::default();
    for (profile, source) in dumps {
        let symbols = match &profile.symbols {
            Some(symbols) if options.focus.is_none() => symbols,
            _ => {
                let resolved = resolve(profile.clone(), source, symbolize);
                builder.add_profile(&resolved, options);
                // Its frames are freed here: their addresses may come back for other frames.
                builder.translator.slots.clear();
                continue;
            }
        };
        // Pass 1: a dense local index per distinct lookup key, the stacks as local indexes.
        index.rebuild(profile, |_| true);
        // Pass 2: an info per local index, walking the symbol section in its own order.
        const UNRESOLVED: u32 = u32::MAX;
        let mut info_of = vec![UNRESOLVED; index.keys.len()];
        for (local, k, raw) in index.named(&symbols.names) {
            let translator = &mut builder.translator;
            let clean = |raw: &[String]| -> Vec<String> {
                raw.iter()
                    .map(|s| names::clean(&names::demangle(s), symbolize.style))
                    .collect()
            };
            info_of[local as usize] = if k > LAST_USER_ADDRESS {
                // Dropped by `TranslateStack` (no functions interned), still an allocator frame
                // or not; rare, so not cached.
                translator.push_info(&clean(raw), true, k, options.skip)
            } else {
                *by_raw
                    .entry(raw)
                    .or_insert_with(|| translator.push_info(&clean(raw), true, k, options.skip))
            };
        }
        for (slot, &k) in info_of.iter_mut().zip(&index.keys) {
            if *slot == UNRESOLVED {
                let name = format!("0x{k:016x}");
                *slot = builder
                    .translator
                    .push_info(&[name], false, k, options.skip);
            }
        }
        // Pass 3: the stacks, in the dump's order.
        for (stack, locals) in profile.stacks.iter().zip(index.stacks()) {
            let (value, variance) = options.measure.pick(&stack.counts);
            builder.slots.clear();
            builder
                .slots
                .extend(locals.iter().map(|&l| info_of[l as usize]));
            builder.add(value, variance, None);
        }
    }
    builder.finish()
}

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
    if !(options.measure.is_objects() || options.show_bytes) {
        return false;
    }
    let wraps = |x: f64| !x.is_finite() || x.abs() >= 9_223_372_036_854_775_808.0;
    wraps(report.total) || report.rows.iter().any(|r| wraps(r.flat) || wraps(r.cum))
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
    let mut out = String::new();
    let (m, b) = (options.measure, options.show_bytes);
    if report.total != 0.0 {
        let _ = writeln!(
            out,
            "Total: {} {}",
            unparse(report.total, m, b),
            units(m, b)
        );
    }
    // The intervals are ours, not jeprof's: printed as the numbers they are (no Perl `%d`
    // wrap-around), and `inf` where a variance overflowed.
    let interval = |value: f64, variance: f64| {
        let (lo, hi) = jeprof_dumpfmt::math::confidence_interval_95(value, variance);
        format!("[{}, {}]", plain_figure(lo, m, b), plain_figure(hi, m, b))
    };
    let mut running = 0.0;
    let mut printed = 0usize;
    for row in &report.rows {
        running += row.flat;
        if row.flat == 0.0 && row.cum == 0.0 {
            continue;
        }
        if options.nodecount.is_some_and(|n| printed >= n) {
            break;
        }
        printed += 1;
        let _ = write!(
            out,
            "{:>8} {:>6} {:>6} {:>8} {:>6} ",
            unparse(row.flat, m, b),
            percent(row.flat, report.shown_total),
            percent(running, report.shown_total),
            unparse(row.cum, m, b),
            percent(row.cum, report.shown_total),
        );
        if options.interval {
            let _ = write!(
                out,
                "{:>21} {:>21} ",
                interval(row.flat, row.flat_variance),
                interval(row.cum, row.cum_variance)
            );
        }
        let _ = writeln!(out, "{}", row.name);
    }
    out
}

/// The header line `format_text` prints above interval columns, for `--interval`.
pub fn interval_legend() -> &'static str {
    "# columns: flat flat% sum% cum cum% [flat 95% interval] [cum 95% interval] function\n"
}

/// Folded stacks as `jeprof --collapsed` prints them: `root;...;leaf <count>`, one line per distinct
/// stack of addresses after allocator frames are removed (so two call sites of one function give two
/// lines, as in jeprof), full function names, inlined ones suffixed `[inline]`, counts truncated. A
/// stack made only of allocator frames prints as an empty stack, as in jeprof. jeprof prints lines in
/// random order; these are sorted.
pub fn collapsed(profiles: &[ResolvedProfile], options: &ReportOptions) -> Vec<(String, f64)> {
    let mut table: HashMap<Vec<u64>, (String, f64)> = HashMap::new();
    for (p, profile) in profiles.iter().enumerate() {
        for stack in &profile.stacks {
            let (value, _) = options.measure.pick(&stack.counts);
            let frames = interesting_frames(&stack.frames, options.skip);
            if let Some(focus) = &options.focus {
                if !focus_matches(frames, focus) {
                    continue;
                }
            }
            // Addresses only mean the same thing within one dump (or one symbol table).
            let mut key: Vec<u64> = Vec::with_capacity(frames.len() + 1);
            key.push(p as u64);
            key.extend(frames.iter().map(|f| f.key));
            let entry = table.entry(key).or_insert_with(|| {
                let mut names: Vec<String> = Vec::with_capacity(frames.len() + 4);
                for f in frames {
                    let last = f.full_names.len().saturating_sub(1);
                    for (j, n) in f.full_names.iter().enumerate() {
                        // `;` separates frames in the folded format.
                        let n = n.replace(';', ":");
                        names.push(if j < last { format!("{n}[inline]") } else { n });
                    }
                }
                names.reverse();
                (names.join(";"), 0.0)
            });
            entry.1 += value;
        }
    }
    let mut lines: Vec<(String, f64)> = table.into_values().collect();
    lines.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    lines
}

/// Formats [`collapsed`] output.
pub fn format_collapsed(lines: &[(String, f64)]) -> String {
    let mut out = String::new();
    for (stack, value) in lines {
        let _ = writeln!(out, "{stack} {}", perl_int(*value));
    }
    out
}

/// Writes a flame graph SVG of the folded stacks with inferno.
pub fn flamegraph(
    lines: &[(String, f64)],
    options: &ReportOptions,
    title: &str,
    out: impl io::Write,
) -> anyhow::Result<()> {
    let folded: Vec<String> = lines
        .iter()
        .filter(|(stack, value)| !stack.is_empty() && *value >= 1.0)
        .map(|(stack, value)| format!("{stack} {}", value.trunc() as u64))
        .collect();
    if folded.is_empty() {
        anyhow::bail!(
            "nothing to draw: no stack holds at least one {}",
            units(options.measure, true)
        );
    }
    let mut fg = inferno::flamegraph::Options::default();
    fg.title = title.to_string();
    fg.count_name = if options.measure.is_objects() {
        "objects"
    } else {
        "bytes"
    }
    .to_string();
    fg.colors =
        inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Rust);
    inferno::flamegraph::from_lines(&mut fg, folded.iter().map(String::as_str), out)
        .map_err(|e| anyhow::anyhow!("drawing the flame graph: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_rust_allocator_shims_give_the_address_to_its_first_real_function() {
        // Innermost first: what a sampled `Vec` allocation's leaf address resolves to.
        let names = [
            "<jeprof_shim::Profiled<A> as core::alloc::global::GlobalAlloc>::alloc",
            "__rustc::__rust_alloc",
            "<alloc::alloc::Global>::alloc_impl",
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "my_app::fill",
        ];
        let functions = |skip: SkipRules| {
            let mut t = Translator::default();
            let info = t.push_info(&names, true, 0x1000, skip) as usize;
            let (uninteresting, ids) = &t.infos[info];
            assert!(!uninteresting);
            ids.iter()
                .map(|&id| t.names[id as usize].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            functions(SkipRules::default()),
            [
                "alloc::raw_vec::RawVecInner<A>::try_allocate_in (inline)",
                "my_app::fill"
            ]
        );
        // As jeprof does: every inlined name kept, the innermost one gets the flat figure.
        let kept = functions(SkipRules {
            rust_allocator_frames: false,
        });
        assert_eq!(kept.len(), 5);
        assert!(kept[0].ends_with("GlobalAlloc>::alloc (inline)"));
    }

    #[test]
    fn perl_int_truncates_and_wraps_like_perl() {
        assert_eq!(perl_int(2161886.25), "2161886");
        assert_eq!(perl_int(-0.9), "0");
        assert_eq!(perl_int(6.665), "6");
        assert_eq!(perl_int(1.8446744073709552e19), "-1");
    }

    #[test]
    fn build_dumps_equals_build_of_resolved_profiles() {
        // Inlined names, allocator frames, a recursive function, an address the symbol section
        // does not name, one it names with nothing, a kernel address, and names shared by two
        // addresses; two dumps whose symbol sections disagree.
        let a = "--- symbol\nbinary=prog\n0x1000 outer--inner\n0x100f malloc\n\
                 0x2000 _ZN4core3fmt5write17h0123456789abcdefE\n0x2fff main\n0x3fff main\n\
                 0x4fff rec\n0x5fff --\n0xffffffffff000000 kfn\n---\n--- heap\n\
                 heap_v2/524288\n  t*: 3: 900000 [0: 0]\n\
                 @ 0x1000 0x3000 0x4000 0x5000 0x4000 0x6000\n  t*: 1: 262144 [0: 0]\n\
                 @ 0x100f 0x2001 0x3000\n  t*: 1: 300000 [0: 0]\n\
                 @ 0xffffffffff000000 0x1001 0x4000 0x7000\n  t*: 1: 400000 [0: 0]\n\
                 MAPPED_LIBRARIES:\n";
        let b = "--- symbol\nbinary=prog\n0x1000 other\n0x2fff main\n---\n--- heap\n\
                 heap_v2/524288\n  t*: 2: 500000 [0: 0]\n\
                 @ 0x1000 0x3000\n  t*: 1: 262144 [0: 0]\n@ 0x1000 0x9000\n  t*: 1: 10000 [0: 0]\n\
                 MAPPED_LIBRARIES:\n";
        let symbolize = SymbolizeOptions::default();
        let dumps: Vec<(Profile, String)> = [a, b]
            .iter()
            .map(|d| {
                (
                    jeprof_dumpfmt::read::parse(d.as_bytes()).unwrap(),
                    "d".to_string(),
                )
            })
            .collect();
        let resolved: Vec<ResolvedProfile> = dumps
            .iter()
            .map(|(p, s)| resolve(p.clone(), s, &symbolize))
            .collect();
        let main = Regex::new("main").unwrap();
        for keep in [false, true] {
            for focus in [None, Some(main.clone())] {
                let options = ReportOptions {
                    show_bytes: true,
                    skip: SkipRules {
                        rust_allocator_frames: !keep,
                    },
                    focus,
                    ..Default::default()
                };
                let fast = build_dumps(&dumps, &symbolize, &options);
                let slow = build(&resolved, &options);
                assert_eq!(fast.total, slow.total);
                assert_eq!(fast.shown_total, slow.shown_total);
                assert_eq!(fast.rows, slow.rows);
                assert!(!fast.rows.is_empty());
            }
        }
    }

    #[test]
    fn unparse_and_percent_match_jeprof() {
        assert_eq!(unparse(2161886.25, Measure::InuseSpace, false), "2.1");
        assert_eq!(percent(1332474.0, 2161886.25), "61.6%");
        assert_eq!(percent(0.0, 0.0), "nan");
        assert_eq!(percent(-1.0, 0.0), "-inf");
    }
}
