//! The text report's figures, added up as dumps are read: [`build`] over resolved profiles,
//! [`build_dumps`] over parsed ones and [`build_files`] over files read one stack at a time, all
//! through one [`Builder`]; and the two reports of a diff, sharing their function ids
//! ([`build_file_pair`]).

use std::io;
use std::path::{Path, PathBuf};

use jeprof_dumpfmt::charge::{self, Objects};
use jeprof_dumpfmt::Profile;
use rayon::prelude::*;
use regex::Regex;

use super::model::{FunctionFigures, FunctionName, Measure, Report, ReportOptions, Row};
use super::text::{prints_integers, wraps_in_perl, write_text};
use super::translate::{reduced_functions, Infos, KeyInfos, Names, Translator};
use crate::attribution::Attribution;
use crate::binary;
use crate::error::Error;
use crate::input::{read_dump_stacks, MemoryMap, ReadPolicy};
use crate::names::SkipRules;
use crate::symbolize::keys::{name_keys, Chunks, KeyIndex};
use crate::symbolize::{NameRule, ResolvedProfile, SymbolizeOptions};

/// Which per-function sums a report keeps: 8 bytes a function each, so a report that prints only
/// flat and cum (or a diff that compares one of them) keeps only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Columns {
    flat: bool,
    cum: bool,
    variances: bool,
}

impl Columns {
    const ALL: Columns = Columns {
        flat: true,
        cum: true,
        variances: true,
    };
}

/// A report's figures: the totals and, per function id, flat, cum and their variances (a column
/// that is not kept stays empty and reads as zero).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    total: f64,
    total_variance: f64,
    shown_total: f64,
    flat: Vec<f64>,
    cum: Vec<f64>,
    flat_variance: Vec<f64>,
    cum_variance: Vec<f64>,
}

/// `column[id] += x` where the column is kept.
#[inline]
fn bump(column: &mut [f64], id: usize, x: f64) {
    if let Some(sum) = column.get_mut(id) {
        *sum += x;
    }
}

fn figure(column: &[f64], id: u32) -> f64 {
    column.get(id as usize).copied().unwrap_or(0.0)
}

impl Sums {
    /// Sizes the kept columns for `functions` ids.
    fn grow(&mut self, columns: Columns, functions: usize) {
        let kept = [
            (&mut self.flat, columns.flat),
            (&mut self.cum, columns.cum),
            (&mut self.flat_variance, columns.flat && columns.variances),
            (&mut self.cum_variance, columns.cum && columns.variances),
        ];
        for (column, keep) in kept {
            if keep && column.len() < functions {
                column.resize(functions, 0.0);
            }
        }
    }

    fn row<'n>(&self, names: &'n Names, id: u32) -> Row<'n> {
        Row {
            name: names.get(id),
            flat: figure(&self.flat, id),
            cum: figure(&self.cum, id),
            flat_variance: figure(&self.flat_variance, id),
            cum_variance: figure(&self.cum_variance, id),
        }
    }

    /// Sum of every entry ([`Report::total`]) and its variance.
    pub(crate) fn total(&self) -> (f64, f64) {
        (self.total, self.total_variance)
    }

    /// Function `id`'s cum (when `cumulative`) or flat figure, and its variance.
    pub(crate) fn figure(&self, id: u32, cumulative: bool) -> (f64, f64) {
        if cumulative {
            (figure(&self.cum, id), figure(&self.cum_variance, id))
        } else {
            (figure(&self.flat, id), figure(&self.flat_variance, id))
        }
    }

    /// Function ids in jeprof's order: flat (cum when `by_cum`), descending, then name.
    fn jeprof_order(&self, names: &Names, by_cum: bool) -> Vec<u32> {
        let key = if by_cum { &self.cum } else { &self.flat };
        let mut order: Vec<u32> = (0..names.len() as u32).collect();
        order.sort_by(|&a, &b| {
            figure(key, b)
                .partial_cmp(&figure(key, a))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| names.get(a).cmp(&names.get(b)))
        });
        order
    }

    /// Whether [`write_text`] prints a figure through Perl's `%d` that it cannot hold. Every
    /// stack's figure is finite and not negative (the reader checks), and every sum adds them in
    /// stack order, a function's flat over a subset of its cum's stacks and its cum over a subset
    /// of the total's: since rounding is monotonic, flat ≤ cum ≤ total, so only the total need be
    /// looked at (the same answer as [`prints_perl_overflow`]'s, which looks at every row).
    pub(crate) fn prints_perl_overflow(&self, options: &ReportOptions) -> bool {
        prints_integers(options) && wraps_in_perl(self.total)
    }
}

/// The running state of a text report: figures per interned function.
struct Builder {
    sums: Sums,
    columns: Columns,
    skip: SkipRules,
    focus: Option<Regex>,
    attribution: Attribution,
    /// Per function id, [`HIDDEN`] and [`SHOWS_FROM`] under `attribution` (computed once a name).
    charging: Vec<u8>,
    translator: Translator,
    functions: Vec<u32>,
    /// A stack's functions before `ReduceProfile` (only with an attribution to apply).
    unreduced: Vec<u32>,
    slots: Vec<u32>,
    /// A stack's slots that `--retain`/`--exclude` keep, reused.
    kept: Vec<u32>,
}

/// [`Builder::charging`]: the function is passed over by `--hide`.
const HIDDEN: u8 = 1;

/// [`Builder::charging`]: the function matches `--show_from`.
const SHOWS_FROM: u8 = 2;

impl Builder {
    fn new(options: &ReportOptions, columns: Columns) -> Builder {
        Builder {
            sums: Sums::default(),
            columns,
            skip: options.skip,
            focus: options.focus.clone(),
            attribution: options.attribution.clone(),
            charging: Vec::new(),
            translator: Translator::new(options.filters.clone(), options.lines),
            functions: Vec::new(),
            unreduced: Vec::new(),
            slots: Vec::new(),
            kept: Vec::new(),
        }
    }

    /// The stack's functions after `ReduceProfile` into `self.functions`, and the one charged
    /// with flat (none when `--show_from` leaves nothing), under `self.attribution`.
    fn charged_functions(&mut self, slots: &[u32]) -> Option<u32> {
        let infos = &self.translator.infos;
        if self.attribution.is_jeprof() {
            reduced_functions(infos, slots, &mut self.functions);
            return self.functions.first().copied();
        }
        let names = &self.translator.names;
        for id in self.charging.len()..names.len() {
            let mut flags = 0;
            if let FunctionName::Text(name) = names.get(id as u32) {
                if self.attribution.hides(name) {
                    flags |= HIDDEN;
                }
                if self.attribution.shows_from(name) {
                    flags |= SHOWS_FROM;
                }
            }
            self.charging.push(flags);
        }
        let unreduced = &mut self.unreduced;
        unreduced.clear();
        for &s in slots {
            unreduced.extend_from_slice(infos.ids(s));
        }
        let charging = &self.charging;
        let flags = |i: usize| charging[unreduced[i] as usize];
        let cut = self.attribution.cut(
            unreduced.len(),
            |i| flags(i) & HIDDEN != 0,
            |i| flags(i) & SHOWS_FROM != 0,
        );
        self.functions.clear();
        for &id in &unreduced[..cut.shown] {
            if !self.functions.contains(&id) {
                self.functions.push(id);
            }
        }
        unreduced
            .get(cut.flat)
            .copied()
            .filter(|_| cut.flat < cut.shown)
    }

    /// Adds one stack whose frames are `slots` (indexes into the translator's `infos`).
    fn add(&mut self, value: f64, variance: f64, slots: &[u32]) {
        self.sums.total += value;
        self.sums.total_variance += variance;
        let infos = &self.translator.infos;
        // Everything up to and including the *last* allocator frame seen from the leaf goes
        // (the charging engine's rule 1, as [`interesting_frames`]).
        let cut = charge::allocator_frames(slots.len(), |i| infos.class[slots[i] as usize]);
        let mut slots = &slots[cut..];
        // jeprof's `FilterFrames` (`--retain`/`--exclude`), then `--focus`, then `--ignore`
        // ([`crate::report::filters`]).
        let mut kept = std::mem::take(&mut self.kept);
        if !infos.dropped.is_empty() {
            kept.clear();
            kept.extend(slots.iter().filter(|&&s| !infos.dropped[s as usize]));
            if kept.is_empty() {
                self.kept = kept;
                return;
            }
            slots = &kept;
        }
        let focused = self.focus.is_none() || slots.iter().any(|&s| infos.focus[s as usize]);
        let ignored = !infos.ignore.is_empty() && slots.iter().any(|&s| infos.ignore[s as usize]);
        let shown = focused && !ignored;
        if !shown {
            self.kept = kept;
            return;
        }
        let flat = self.charged_functions(slots);
        self.kept = kept;
        self.sums.grow(self.columns, self.translator.names.len());
        let sums = &mut self.sums;
        if let Some(id) = flat {
            let id = id as usize;
            bump(&mut sums.flat, id, value);
            bump(&mut sums.flat_variance, id, variance);
            sums.shown_total += value;
        }
        for &id in &self.functions {
            let id = id as usize;
            bump(&mut sums.cum, id, value);
            bump(&mut sums.cum_variance, id, variance);
        }
    }

    fn add_profile(&mut self, profile: &ResolvedProfile, options: &ReportOptions) {
        let mut slots = std::mem::take(&mut self.slots);
        for stack in &profile.stacks {
            let (value, variance) = options.measure.pick(&stack.counts);
            slots.clear();
            for f in &stack.frames {
                let slot = self.translator.slot(f, self.skip, self.focus.as_ref());
                slots.push(slot);
            }
            self.add(value, variance, &slots);
        }
        self.slots = slots;
    }

    /// Adds a dump's stacks, given as its lookup keys ([`KeyIndex`]) and per stack the figure and
    /// its variance; `profile` gives the symbol section or the memory map, its stacks are not
    /// read. [`Builder::translate_keys`], then [`Builder::add_translated`].
    fn add_keyed(
        &mut self,
        profile: &Profile,
        mut index: KeyIndex,
        figures: impl Iterator<Item = (f64, f64)>,
        symbolize: &SymbolizeOptions,
    ) {
        let info_of = self.translate_keys(profile, &mut index, symbolize);
        self.add_translated(index, info_of, figures);
    }

    /// Adds the stacks of a dump whose keys [`Builder::translate_keys`] gave infos, with their
    /// figures and variances in order.
    fn add_translated(
        &mut self,
        mut index: KeyIndex,
        info_of: Vec<u32>,
        figures: impl Iterator<Item = (f64, f64)>,
    ) {
        // The keys are done with: the stacks become info indexes in place.
        index.forget_lookup();
        index.keys = Chunks::default();
        for local in &mut index.flat {
            *local = info_of[*local as usize];
        }
        drop(info_of);
        for (slots, (value, variance)) in index.stacks().zip(figures) {
            self.add(value, variance, slots);
        }
        // The infos belong to this dump's keys; freed, not kept for the next dump (a million
        // distinct addresses take tens of megabytes of them).
        self.translator.infos = Infos::default();
    }

    /// An info (index into `infos`) for each key of `index`, by local index: the translation
    /// engine's pass ([`name_keys`]) with the report's side of it ([`KeyInfos`]). Each distinct key
    /// is named once, as [`resolve`](crate::symbolize::resolve) names it, so the report is
    /// [`build`]'s of the resolved dump; with a symbol section, (without `--focus`, `--ignore` and
    /// `--lines`) each distinct entry of raw names is demangled, cleaned, translated and tested
    /// against the skip list once per dump.
    fn translate_keys(
        &mut self,
        profile: &Profile,
        index: &mut KeyIndex,
        symbolize: &SymbolizeOptions,
    ) -> Vec<u32> {
        let focus = self.focus.as_ref();
        self.translator.reserve(index.keys.len(), focus.is_some());
        let map = MemoryMap::of(profile);
        // The allocator's objects, by the memory map (parsed only under the project's rules).
        let objects = if self.skip.allocator_objects {
            Objects::from_mappings(map.mappings())
        } else {
            Objects::default()
        };
        let modules = (symbolize.rule == NameRule::Sized).then_some(&map);
        let mut infos = KeyInfos::new(
            &mut self.translator,
            self.skip,
            focus,
            symbolize.style,
            objects,
            modules,
        );
        name_keys(profile, index, symbolize, &map, &mut infos)
    }

    fn finish_sums(&mut self) -> Sums {
        std::mem::take(&mut self.sums)
    }

    /// Frees what only interning needs, once the last dump's keys are translated.
    fn finish_names(&mut self) {
        self.translator.names.forget_lookup();
    }

    fn finish(mut self, by_cum: bool) -> Report {
        let sums = self.finish_sums();
        let names = self.translator.names;
        // Every function a frame names, counted or not (zeros print nothing).
        let mut rows: Vec<FunctionFigures> = (0..names.len() as u32)
            .map(|id| sums.row(&names, id).to_figures())
            .collect();
        let key = |r: &FunctionFigures| if by_cum { r.cum } else { r.flat };
        rows.sort_by(|a, b| {
            key(b)
                .partial_cmp(&key(a))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.name.cmp(&b.name))
        });
        Report {
            total: sums.total,
            total_variance: sums.total_variance,
            shown_total: sums.shown_total,
            rows,
        }
    }
}

/// Computes the text report of `profiles` added together.
pub fn build(profiles: &[ResolvedProfile], options: &ReportOptions) -> Report {
    let mut builder = Builder::new(options, Columns::ALL);
    for profile in profiles {
        builder.add_profile(profile, options);
    }
    builder.finish(options.sort_by_cum)
}

/// [`build`] straight from parsed dumps (with where each came from, for messages): the same report
/// as `build(&[resolve(..), ..])`, without building a [`Frame`](crate::symbolize::Frame) per
/// address: each distinct address is looked up once per dump (walking a symbol section in its own
/// order), and each distinct entry of raw names is demangled, cleaned, translated and tested
/// against the skip list once per dump.
pub fn build_dumps(
    dumps: &[(Profile, String)],
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
) -> Report {
    let mut builder = Builder::new(options, Columns::ALL);
    for (profile, _) in dumps {
        let mut index = KeyIndex::default();
        index.rebuild(profile, |_| true);
        let figures = profile
            .stacks
            .iter()
            .map(|s| options.measure.pick(&s.counts));
        builder.add_keyed(profile, index, figures, symbolize);
    }
    builder.finish(options.sort_by_cum)
}

/// One dump read for a report, with its stacks kept as little as a report needs until its memory
/// map (the end of the file) says how to name their frames: each stack's lookup keys as dense
/// indexes ([`KeyIndex`]) and the one figure the report shows, with its variance. About 28 bytes a
/// stack of two frames, where the [`Profile`] holds about 200.
struct ReportDump {
    /// The dump without its stacks: the symbol section and the memory map.
    profile: Profile,
    index: KeyIndex,
    values: Chunks<f64>,
    /// Empty unless variances are reported.
    variances: Chunks<f64>,
}

impl ReportDump {
    fn read(
        path: &Path,
        policy: &ReadPolicy<'_>,
        measure: Measure,
        variances: bool,
    ) -> Result<ReportDump, jeprof_dumpfmt::Error> {
        let mut index = KeyIndex::default();
        let (mut values, mut kept_variances) = (Chunks::default(), Chunks::default());
        let profile = read_dump_stacks(path, policy, |so_far, stack| {
            if index.lens.len() == 0 {
                index.expect_symbolized(so_far);
            }
            index.push_stack(&stack.frames, |_| true);
            let (value, variance) = measure.pick(&stack.counts);
            values.push(value);
            if variances {
                kept_variances.push(variance);
            }
        })?;
        Ok(ReportDump {
            profile,
            index,
            values,
            variances: kept_variances,
        })
    }

    /// Adds the dump to `builder`; `last`: no other dump follows.
    fn add_to(self, builder: &mut Builder, symbolize: &SymbolizeOptions, last: bool) {
        let ReportDump {
            profile,
            mut index,
            values,
            variances,
        } = self;
        let info_of = builder.translate_keys(&profile, &mut index, symbolize);
        // What the stacks are added up with is made: free the symbol section (a few hundred
        // bytes an entry) and, after the last dump, the names' lookup, before the sums grow.
        drop(profile);
        if last {
            builder.finish_names();
        }
        // Zeros when variances are not kept.
        let variances = variances.iter().copied().chain(std::iter::repeat(0.0));
        builder.add_translated(index, info_of, values.iter().copied().zip(variances));
    }
}

/// A text report of any size, held compactly: each function's name once in one buffer and its
/// figures in columns, rows in jeprof's order. [`build_files`] makes one; [`FunctionTable::rows`]
/// and [`FunctionTable::write_text`] give what [`Report::rows`] and
/// [`format_text`](super::format_text) give for the same dumps, without a `String` per function or
/// the whole text in memory.
pub struct FunctionTable {
    names: Names,
    sums: Sums,
    order: Vec<u32>,
}

impl FunctionTable {
    /// Sum of every entry ([`Report::total`]).
    pub fn total(&self) -> f64 {
        self.sums.total
    }

    /// Variance of [`FunctionTable::total`] ([`Report::total_variance`]; zero unless the
    /// options asked for intervals).
    pub fn total_variance(&self) -> f64 {
        self.sums.total_variance
    }

    /// Sum of flat figures after filtering ([`Report::shown_total`]).
    pub fn shown_total(&self) -> f64 {
        self.sums.shown_total
    }

    /// The functions in jeprof's order ([`Report::rows`]).
    pub fn rows(&self) -> impl ExactSizeIterator<Item = Row<'_>> + '_ {
        self.order.iter().map(|&id| self.sums.row(&self.names, id))
    }

    /// The same as [`prints_perl_overflow`](super::prints_perl_overflow) on the [`Report`] of the
    /// same dumps.
    pub fn prints_perl_overflow(&self, options: &ReportOptions) -> bool {
        self.sums.prints_perl_overflow(options)
    }

    /// Writes the report as [`format_text`](super::format_text) formats it.
    pub fn write_text(&self, options: &ReportOptions, out: impl io::Write) -> io::Result<()> {
        write_text(self.total(), self.shown_total(), self.rows(), options, out)
    }
}

/// [`build_dumps`] of dump files, reading each one stack at a time: memory holds what the report
/// keeps (about 28 bytes a stack until the dump's memory map is read, then a name and the figures
/// per function), never a dump's [`Profile`]. Files are read in parallel, then added in order.
/// Errors name the file (and line) of the first failing dump in `paths` order.
pub fn build_files(
    paths: &[PathBuf],
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<FunctionTable, Error> {
    let columns = Columns {
        flat: true,
        cum: true,
        variances: options.interval,
    };
    let dumps: Vec<ReportDump> = paths
        .par_iter()
        .map(|p| ReportDump::read(p, policy, options.measure, columns.variances))
        .collect::<Result<_, _>>()?;
    for (dump, path) in dumps.iter().zip(paths) {
        binary::check(&dump.profile, path, symbolize.binary.as_ref())?;
    }
    let mut builder = Builder::new(options, columns);
    let count = dumps.len();
    for (i, dump) in dumps.into_iter().enumerate() {
        dump.add_to(&mut builder, symbolize, i + 1 == count);
    }
    let sums = builder.finish_sums();
    let names = builder.translator.names;
    let order = sums.jeprof_order(&names, options.sort_by_cum);
    Ok(FunctionTable { names, sums, order })
}

/// Two reports over the same function ids ([`build_file_pair`]), for a diff.
pub(crate) struct PairedSums {
    names: Names,
    pub(crate) base: Sums,
    pub(crate) new: Sums,
}

/// The reports of two dump files, read one after the other, whose functions share ids: a diff of
/// two dumps of millions of stacks holds each function's name once and only the sums it compares
/// (`cum` or flat, with their variances).
pub(crate) fn build_file_pair(
    base: &Path,
    new: &Path,
    cumulative: bool,
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<PairedSums, Error> {
    let columns = Columns {
        flat: !cumulative,
        cum: cumulative,
        variances: true,
    };
    let mut builder = Builder::new(options, columns);
    let read = |path: &Path| -> Result<ReportDump, Error> {
        let dump = ReportDump::read(path, policy, options.measure, true)?;
        binary::check(&dump.profile, path, symbolize.binary.as_ref())?;
        Ok(dump)
    };
    read(base)?.add_to(&mut builder, symbolize, false);
    let base = builder.finish_sums();
    read(new)?.add_to(&mut builder, symbolize, true);
    let mut new = builder.finish_sums();
    let names = builder.translator.names;
    new.grow(columns, names.len());
    let mut base = base;
    base.grow(columns, names.len());
    Ok(PairedSums { names, base, new })
}

impl PairedSums {
    pub(crate) fn name(&self, id: u32) -> FunctionName<'_> {
        self.names.get(id)
    }

    pub(crate) fn functions(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::resolve;

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
                        allocator_objects: !keep,
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
    fn attributed_reports_of_dumps_equal_those_of_resolved_profiles() {
        // Inlined standard library names at the leaf, a stack of only hidden functions, a stack
        // `--show_from` leaves empty, recursion through a hidden function.
        let dump = "--- symbol\nbinary=prog\n\
                    0x1000 my_app::fill--alloc::vec::Vec<T>::push\n0x2000 my_app::main\n\
                    0x3000 hashbrown::raw::RawTable<T>::reserve_rehash\n0x4000 std::thread::spawn\n\
                    0x5000 core::iter::fold\n---\n--- heap\nheap_v2/524288\n  t*: 4: 900000 [0: 0]\n\
                    @ 0x1000 0x2001\n  t*: 1: 262144 [0: 0]\n@ 0x3000 0x4001\n  t*: 1: 300000 [0: 0]\n\
                    @ 0x5000 0x1001 0x5001 0x2001\n  t*: 2: 400000 [0: 0]\nMAPPED_LIBRARIES:\n";
        let symbolize = SymbolizeOptions::default();
        let profile = jeprof_dumpfmt::read::parse(dump.as_bytes()).unwrap();
        let dumps = [(profile.clone(), "d".to_string())];
        let resolved = [resolve(profile, "d", &symbolize)];
        let fill = Regex::new("^my_app::fill$").unwrap();
        for show_from in [None, Some(fill)] {
            for sort_by_cum in [false, true] {
                let options = ReportOptions {
                    show_bytes: true,
                    attribution: crate::attribution::Attribution {
                        show_from: show_from.clone(),
                        ..crate::attribution::Attribution::user_code()
                    },
                    sort_by_cum,
                    ..Default::default()
                };
                let fast = build_dumps(&dumps, &symbolize, &options);
                let slow = build(&resolved, &options);
                assert_eq!(fast.rows, slow.rows);
                assert_eq!(fast.shown_total, slow.shown_total);
                let flat = |name: &str| {
                    fast.rows
                        .iter()
                        .find(|r| r.name == name)
                        .map_or(0.0, |r| r.flat)
                };
                if show_from.is_none() {
                    // Past the inlined `Vec::push` and (recursing) `core::iter::fold`.
                    assert!(flat("my_app::fill") > 0.0);
                    // Only hidden functions: charged to the leaf, as jeprof charges it.
                    assert!(flat("hashbrown::raw::RawTable<T>::reserve_rehash") > 0.0);
                    assert_eq!(flat("alloc::vec::Vec<T>::push (inline)"), 0.0);
                } else {
                    // The stack without `my_app::fill` keeps no function, and charges nothing.
                    assert_eq!(flat("hashbrown::raw::RawTable<T>::reserve_rehash"), 0.0);
                    assert!(!fast
                        .rows
                        .iter()
                        .any(|r| r.name == "my_app::main" && r.cum > 0.0));
                }
            }
        }
    }
}
