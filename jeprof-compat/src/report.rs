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
//!    flat (descending; cum with `--cum`) then name, rows with flat = cum = 0 left out, percentages
//!    of the flat total.
//!
//! Our own mode adds one step between 4 and 5 ([`ReportOptions::attribution`],
//! [`crate::attribution`]): `--show_from` drops functions toward the root, and flat goes to the
//! first function (from the leaf) that `--hide` does not match, by default the first that is not
//! the standard library's or the allocator's. With `Attribution::default()` (what
//! `--jeprof_names` gives) the report is jeprof's.
//!
//! Figures are `f64` sums of what jeprof computes per entry; jeprof adds them in Perl hash order,
//! which is random, so a figure that lands within a rounding error of an integer (or of a 0.1 MB
//! step) can print one unit apart from one jeprof run to the next.
//!
//! ## Memory
//! [`build_files`] (the command line's text report) never holds a dump: it reads one stack at a
//! time ([`jeprof_dumpfmt::read::read_file_stacks_with`]) and keeps, until the dump's memory map
//! (its last section) says how to name the frames, each stack's distinct addresses as dense
//! indexes and the one figure shown (about 28 bytes a stack of two frames, where a [`Profile`]
//! takes about 200); then each distinct address is named once, the stacks are added up per
//! function, and what remains is each function's name, once (an address nothing names as the
//! address), and its sums. Its text is written as it is made ([`FunctionTable::write_text`]).
//! Measured on a dump of a million two-frame stacks, 55 MB, with a million distinct addresses
//! nothing names: a peak resident size of 2.2 times the dump, where whole dumps took 18 times.
//! `--collapsed` and flame graphs ([`collapsed`]) still take resolved profiles.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::Hasher as _;
use std::io;
use std::path::{Path, PathBuf};

use hashbrown::hash_table::{Entry, HashTable};
use jeprof_dumpfmt::{Counts, Estimate, Profile, SourceLine};
use rayon::prelude::*;
use regex::Regex;

use crate::attribution::Attribution;
use crate::hash::{FastHasher, FastMap};
use crate::maps;
use crate::names::{self, SkipRules};
use crate::symbolize::{
    unnamed, Chunks, Frame, KeyIndex, RawNames, ResolvedProfile, SymbolizeOptions,
};
use crate::views::filters::StackFilters;
use crate::{read_dump_stacks, Error, ReadPolicy};

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
    /// Which function of a stack is charged with flat, and which are shown; the default is
    /// jeprof's charging.
    pub attribution: Attribution,
    /// Sort rows by cum rather than flat (jeprof's `--cum`).
    pub sort_by_cum: bool,
    /// `--ignore`, `--retain`, `--exclude`.
    pub filters: StackFilters,
    /// `--lines`: a row per function and source line (`name file:line`) rather than per
    /// function ([`crate::views::lines`]).
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

/// How many of a frame's innermost names are allocator functions Rust inlined into its caller
/// (the text report's [`Translator::push_info`] skips them the same way), the outermost never.
pub(crate) fn allocator_names_inlined(frame: &Frame, skip: SkipRules) -> usize {
    if !frame.symbolized || !skip.rust_allocator_frames {
        return 0;
    }
    let names = &frame.names;
    names
        .iter()
        .take(names.len().saturating_sub(1))
        .take_while(|n| names::is_uninteresting(n, skip))
        .count()
}

fn focus_matches(frames: &[std::sync::Arc<Frame>], focus: &Regex) -> bool {
    frames
        .iter()
        .any(|f| crate::views::filters::frame_matches(focus, f.key, &f.names, &f.lines))
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
    fn bytes<'b>(&self, buffer: &'b mut [u8; 18]) -> &'b [u8]
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

/// What a [`Names`] entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NameKind {
    /// Spelled out in `text`: the entry is its index in `spelled_ends`.
    Text,
    /// An address nothing names (the entry), printed bare.
    Unnamed,
    /// An address nothing names (the entry), printed after `0x`.
    UnnamedPrefixed,
}

/// Function names, each stored once, with dense ids: spelled-out ones end to end in one buffer,
/// addresses nothing names as the address (a raw dump of a million distinct addresses without its
/// program has a million of those). A `String` per name (24 bytes and an allocation), held again
/// as the key of a map from name to id, would be most of a report's memory.
#[derive(Default)]
struct Names {
    kinds: Vec<NameKind>,
    /// Per name, by kind: the index of its end in `spelled_ends`, or the address.
    entries: Vec<u64>,
    text: String,
    /// Spelled-out name `i` is `text[spelled_ends[i - 1]..spelled_ends[i]]` (from 0 for the first).
    spelled_ends: Vec<usize>,
    /// The ids, hashed by their printed names.
    ids: HashTable<u32>,
}

fn hash_name(name: FunctionName<'_>) -> u64 {
    let mut hasher = FastHasher::default();
    hasher.write(name.bytes(&mut [0; 18]));
    hasher.finish()
}

/// The parts of a [`Names`] that [`Names::get`] reads (borrowed apart from its `ids`).
#[derive(Clone, Copy)]
struct NameParts<'n> {
    kinds: &'n [NameKind],
    entries: &'n [u64],
    text: &'n str,
    spelled_ends: &'n [usize],
}

impl<'n> NameParts<'n> {
    fn get(self, id: u32) -> FunctionName<'n> {
        let (kind, entry) = (self.kinds[id as usize], self.entries[id as usize]);
        match kind {
            NameKind::Text => {
                let i = entry as usize;
                let start = if i == 0 { 0 } else { self.spelled_ends[i - 1] };
                FunctionName::Text(&self.text[start..self.spelled_ends[i]])
            }
            NameKind::Unnamed => FunctionName::Unnamed {
                key: entry,
                prefixed: false,
            },
            NameKind::UnnamedPrefixed => FunctionName::Unnamed {
                key: entry,
                prefixed: true,
            },
        }
    }
}

impl Names {
    fn len(&self) -> usize {
        self.kinds.len()
    }

    fn parts(&self) -> NameParts<'_> {
        NameParts {
            kinds: &self.kinds,
            entries: &self.entries,
            text: &self.text,
            spelled_ends: &self.spelled_ends,
        }
    }

    fn get(&self, id: u32) -> FunctionName<'_> {
        self.parts().get(id)
    }

    /// The id of `name` (of any name that prints the same), a new one on first sight.
    fn intern(&mut self, name: FunctionName<'_>) -> u32 {
        let parts = NameParts {
            kinds: &self.kinds,
            entries: &self.entries,
            text: &self.text,
            spelled_ends: &self.spelled_ends,
        };
        let entry = self.ids.entry(
            hash_name(name),
            |&id| parts.get(id) == name,
            |&id| hash_name(parts.get(id)),
        );
        match entry {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let id = self.kinds.len() as u32;
                e.insert(id);
                match name {
                    FunctionName::Text(text) => {
                        self.kinds.push(NameKind::Text);
                        self.entries.push(self.spelled_ends.len() as u64);
                        self.text.push_str(text);
                        self.spelled_ends.push(self.text.len());
                    }
                    FunctionName::Unnamed { key, prefixed } => {
                        self.kinds.push(if prefixed {
                            NameKind::UnnamedPrefixed
                        } else {
                            NameKind::Unnamed
                        });
                        self.entries.push(key);
                    }
                }
                id
            }
        }
    }

    /// Frees what only [`Names::intern`] needs, once every name is known.
    fn forget_lookup(&mut self) {
        self.ids = HashTable::new();
    }
}

/// Per distinct frame, what the report needs of it: whether it is an allocator frame jeprof removes
/// (a string test, so computed once), whether it matches `--focus`, and its translated function
/// ids; in flat arrays (a dump of a million distinct addresses has a million of these).
#[derive(Default)]
struct Infos {
    uninteresting: Vec<bool>,
    /// Empty without `--focus`.
    focus: Vec<bool>,
    /// Whether `--ignore` matches the frame; empty without `--ignore`.
    ignore: Vec<bool>,
    /// Whether `--retain`/`--exclude` drop the frame; empty without them.
    dropped: Vec<bool>,
    /// Info `i`'s function ids are `ids[ends[i - 1]..ends[i]]` (from 0 for the first).
    ends: Vec<usize>,
    ids: Vec<u32>,
}

impl Infos {
    /// Room for `frames` more infos of one id each (the usual), and their `--focus` flags.
    fn reserve(&mut self, frames: usize, focus: bool) {
        self.uninteresting.reserve(frames);
        self.ends.reserve(frames);
        self.ids.reserve(frames);
        if focus {
            self.focus.reserve(frames);
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn ids(&self, info: u32) -> &[u32] {
        let i = info as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.ids[start..self.ends[i]]
    }
}

/// Interned function names, and each frame's translated names (`TranslateStack`), computed once per
/// distinct frame.
#[derive(Default)]
struct Translator {
    names: Names,
    /// `--ignore`, `--retain`, `--exclude`: flags in `infos` for each frame.
    filters: StackFilters,
    /// `--lines`: functions are interned with their source lines.
    lines: bool,
    /// [`build`]'s frames: each distinct frame's dense index into `infos` (one hash lookup per
    /// frame of a stack).
    slots: FastMap<*const Frame, u32>,
    infos: Infos,
    /// A name being made (`… (inline)`), reused.
    scratch: String,
}

impl Translator {
    /// Room for the infos of `frames` distinct frames: sized once, rather than doubled, as every
    /// doubling leaves the old buffer behind in the allocator's free memory, counted in the
    /// process's size until it is reused or returned. (Names are not reserved for: a dump's
    /// frames can name as many new functions as they are, or none.)
    fn reserve(&mut self, frames: usize, focus: bool) {
        self.infos.reserve(frames, focus);
    }

    /// The dense index of a frame, translating it on first sight.
    fn slot(&mut self, f: &std::sync::Arc<Frame>, skip: SkipRules, focus: Option<&Regex>) -> u32 {
        let key = std::sync::Arc::as_ptr(f);
        if let Some(&slot) = self.slots.get(&key) {
            return slot;
        }
        let slot = self.push_info(&f.names, &f.lines, f.symbolized, f.key, skip, focus);
        self.slots.insert(key, slot);
        slot
    }

    /// Adds the info of a frame with these names (innermost first, as [`Frame::names`] holds
    /// them) at lookup key `key`: whether it is an allocator frame, whether it matches `focus`
    /// (its 16-digit key or one of its names, as jeprof's `--focus`), and its translated
    /// functions; returns its index in `infos`.
    fn push_info<S: AsRef<str>>(
        &mut self,
        names: &[S],
        lines: &[Option<SourceLine>],
        symbolized: bool,
        key: u64,
        skip: SkipRules,
        focus: Option<&Regex>,
    ) -> u32 {
        if let Some(focus) = focus {
            let matches = crate::views::filters::frame_matches(focus, key, names, lines);
            self.infos.focus.push(matches);
        }
        if self.filters.ignore.is_some() {
            let ignored = self.filters.ignores(key, names, lines);
            self.infos.ignore.push(ignored);
        }
        if self.filters.drops_frames() {
            let function = names.last().map_or("", AsRef::as_ref);
            let dropped = self.filters.drops_frame(function);
            self.infos.dropped.push(dropped);
        }
        let (mut names, mut lines) = (names, lines);
        if symbolized && skip.rust_allocator_frames {
            // Rust inlines its allocation shims (and a profiler's `GlobalAlloc`) into the caller,
            // so one address can carry allocator names innermost and the caller's outermost: it
            // belongs to its innermost name that is not an allocator frame.
            while names.len() > 1 && names::is_uninteresting(names[0].as_ref(), skip) {
                names = &names[1..];
                lines = lines.get(1..).unwrap_or_default();
            }
        }
        let function = names.last().map_or("", AsRef::as_ref);
        let uninteresting = symbolized && names::is_uninteresting(function, skip);
        if self.lines {
            // `name file:line` per name, the inlined ones `name (inline) file:line`, as
            // `TranslateStack` ([`crate::views::lines::with_line`]).
            let last = names.len().saturating_sub(1);
            let named: Vec<String> = (0..names.len())
                .map(|j| {
                    let line = lines.get(j).and_then(Option::as_ref);
                    let name = names[j].as_ref();
                    if j < last {
                        crate::views::lines::with_line(&format!("{name} (inline)"), line)
                    } else {
                        crate::views::lines::with_line(name, line)
                    }
                })
                .collect();
            if key <= LAST_USER_ADDRESS {
                for name in &named {
                    let id = self.names.intern(FunctionName::Text(name));
                    self.infos.ids.push(id);
                }
            }
        } else {
            self.translate(names, key);
        }
        self.infos.uninteresting.push(uninteresting);
        self.infos.ends.push(self.infos.ids.len());
        (self.infos.len() - 1) as u32
    }

    /// [`Translator::push_info`] for an address nothing names, whose one name is [`unnamed`]`(key,
    /// prefixed)`: interned as the address.
    fn push_unnamed(&mut self, key: u64, prefixed: bool, focus: Option<&Regex>) -> u32 {
        if let Some(focus) = focus {
            let matches =
                focus.is_match(&format!("{key:016x}")) || focus.is_match(&unnamed(key, prefixed));
            self.infos.focus.push(matches);
        }
        if self.filters.ignore.is_some() || self.filters.drops_frames() {
            let name = unnamed(key, prefixed);
            if self.filters.ignore.is_some() {
                let ignored = self.filters.ignores(key, &[&name], &[]);
                self.infos.ignore.push(ignored);
            }
            if self.filters.drops_frames() {
                self.infos.dropped.push(self.filters.drops_frame(&name));
            }
        }
        if key <= LAST_USER_ADDRESS {
            let id = if self.lines {
                let name = crate::views::lines::unnamed_with_line(key, prefixed);
                self.names.intern(FunctionName::Text(&name))
            } else {
                self.names.intern(FunctionName::Unnamed { key, prefixed })
            };
            self.infos.ids.push(id);
        }
        // Not symbolized: never an allocator frame.
        self.infos.uninteresting.push(false);
        self.infos.ends.push(self.infos.ids.len());
        (self.infos.len() - 1) as u32
    }

    /// Adds the functions at a frame to `infos.ids`, innermost first, all but the outermost
    /// suffixed ` (inline)`; none for an address above `0x7fffffffffffffff`, which jeprof drops.
    fn translate<S: AsRef<str>>(&mut self, names: &[S], key: u64) {
        if key > LAST_USER_ADDRESS {
            return;
        }
        let last = names.len().saturating_sub(1);
        for (j, n) in names.iter().map(AsRef::as_ref).enumerate() {
            if n.is_empty() {
                continue;
            }
            let id = if j < last {
                self.scratch.clear();
                self.scratch.push_str(n);
                self.scratch.push_str(" (inline)");
                self.names.intern(FunctionName::Text(&self.scratch))
            } else {
                self.names.intern(FunctionName::Text(n))
            };
            self.infos.ids.push(id);
        }
    }
}

/// The function ids of a stack (given as frame slots, already past [`interesting_frames`]) after
/// `TranslateStack` and `ReduceProfile` (each once), innermost first.
fn reduced_functions(infos: &Infos, slots: &[u32], out: &mut Vec<u32>) {
    out.clear();
    for &s in slots {
        for &id in infos.ids(s) {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
}

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
            translator: Translator {
                filters: options.filters.clone(),
                lines: options.lines,
                ..Translator::default()
            },
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
        // jeprof throws away everything up to and including the *last* allocator frame seen
        // from the leaf ([`interesting_frames`]).
        let cut = slots
            .iter()
            .rposition(|&s| infos.uninteresting[s as usize])
            .map_or(0, |i| i + 1);
        let mut slots = &slots[cut..];
        // jeprof's `FilterFrames` (`--retain`/`--exclude`), then `--focus`, then `--ignore`
        // ([`crate::views::filters`]).
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

    /// An info (index into `infos`) for each key of `index`, by local index.
    ///
    /// With a symbol section, each distinct key is looked up once, walking the section in its own
    /// order, and (without `--focus`) each distinct entry of raw names is demangled, cleaned,
    /// translated and tested against the skip list once per dump, the way
    /// [`crate::merge::Accumulator::add_dump`] does; without one, each distinct key is looked up
    /// once in the binaries its memory map names, as [`resolve`](crate::resolve) does. Either way
    /// a key's names are what [`resolve`](crate::resolve) gives its frame, so the report is
    /// [`build`]'s of the resolved dump.
    fn translate_keys(
        &mut self,
        profile: &Profile,
        index: &mut KeyIndex,
        symbolize: &SymbolizeOptions,
    ) -> Vec<u32> {
        let (skip, focus) = (self.skip, self.focus.as_ref());
        let translator = &mut self.translator;
        translator.reserve(index.keys.len(), focus.is_some());
        let Some(symbols) = &profile.symbols else {
            // Keys are taken in order: finding one is no longer needed.
            index.forget_lookup();
            let mappings = profile
                .mapped_libraries
                .as_deref()
                .map(maps::parse_maps)
                .unwrap_or_default();
            let mut raw = RawNames::new(symbolize, &mappings);
            return index
                .keys
                .iter()
                .map(|&k| match raw.names(k) {
                    Ok((names, lines)) => {
                        translator.push_info(&names, &lines, true, k, skip, focus)
                    }
                    Err(prefixed) => translator.push_unnamed(k, prefixed, focus),
                })
                .collect();
        };
        // Each distinct entry of raw names gets one info, unless `--focus` (which also matches
        // the key) needs one per key.
        let mut by_raw: FastMap<&[String], u32> = FastMap::default();
        const UNRESOLVED: u32 = u32::MAX;
        let mut info_of = vec![UNRESOLVED; index.keys.len()];
        for (local, k, raw) in index.named(&symbols.names) {
            let clean = |raw: &[String]| -> Vec<String> {
                raw.iter()
                    .map(|s| names::clean(&names::demangle(s), symbolize.style))
                    .collect()
            };
            // `--focus` and `--ignore` match the key, `--lines` names the key's own lines.
            let per_key =
                focus.is_some() || translator.filters.ignore.is_some() || translator.lines;
            info_of[local as usize] = if k > LAST_USER_ADDRESS || per_key {
                // Dropped by `TranslateStack` (no functions interned), still an allocator frame
                // or not, and rare; or, under `--focus`, matched by its own key too: not shared.
                let lines = symbols.lines.get(&k).map_or(&[][..], Vec::as_slice);
                translator.push_info(&clean(raw), lines, true, k, skip, focus)
            } else {
                *by_raw
                    .entry(raw)
                    .or_insert_with(|| translator.push_info(&clean(raw), &[], true, k, skip, None))
            };
        }
        for (slot, &k) in info_of.iter_mut().zip(&index.keys) {
            if *slot == UNRESOLVED {
                *slot = translator.push_unnamed(k, true, focus);
            }
        }
        info_of
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
/// as `build(&[resolve(..), ..])`, without building a [`Frame`] per address: each distinct
/// address is looked up once per dump (walking a symbol section in its own order), and each
/// distinct entry of raw names is demangled, cleaned, translated and tested against the skip list
/// once per dump.
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
/// and [`FunctionTable::write_text`] give what [`Report::rows`] and [`format_text`] give for the
/// same dumps, without a `String` per function or the whole text in memory.
pub struct FunctionTable {
    names: Names,
    sums: Sums,
    order: Vec<u32>,
}

/// One function's figures in a [`FunctionTable`] ([`FunctionFigures`], borrowed). A figure the
/// table does not keep (the variances, unless asked for) reads as zero.
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

impl FunctionTable {
    /// Sum of every entry ([`Report::total`]).
    pub fn total(&self) -> f64 {
        self.sums.total
    }

    /// Sum of flat figures after filtering ([`Report::shown_total`]).
    pub fn shown_total(&self) -> f64 {
        self.sums.shown_total
    }

    /// The functions in jeprof's order ([`Report::rows`]).
    pub fn rows(&self) -> impl ExactSizeIterator<Item = Row<'_>> + '_ {
        self.order.iter().map(|&id| self.sums.row(&self.names, id))
    }

    /// The same as [`prints_perl_overflow`] on the [`Report`] of the same dumps.
    pub fn prints_perl_overflow(&self, options: &ReportOptions) -> bool {
        self.sums.prints_perl_overflow(options)
    }

    /// Writes the report as [`format_text`] formats it.
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
        crate::binary::check(&dump.profile, path, symbolize.binary.as_ref())?;
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
        crate::binary::check(&dump.profile, path, symbolize.binary.as_ref())?;
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
fn prints_integers(options: &ReportOptions) -> bool {
    options.measure.is_objects() || options.show_bytes
}

/// Whether Perl's `%d` ([`perl_int`]) cannot print `x` as it is: not finite, or 2^63 and more.
fn wraps_in_perl(x: f64) -> bool {
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
fn write_text<'a>(
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

/// The frames of a stack that a report shows, innermost first, or `None` when it shows none of the
/// stack: jeprof's `RemoveUninterestingFrames` ([`interesting_frames`]), then `--retain` and
/// `--exclude`, `--focus` and `--ignore` ([`crate::views::filters`]), in jeprof's order.
pub fn shown_frames<'f>(
    frames: &'f [std::sync::Arc<Frame>],
    options: &ReportOptions,
) -> Option<std::borrow::Cow<'f, [std::sync::Arc<Frame>]>> {
    let frames = interesting_frames(frames, options.skip);
    let filters = &options.filters;
    let frames: std::borrow::Cow<'f, [std::sync::Arc<Frame>]> = if filters.drops_frames() {
        let retained: Vec<std::sync::Arc<Frame>> = frames
            .iter()
            .filter(|f| !filters.drops_frame(f.function()))
            .cloned()
            .collect();
        if retained.is_empty() {
            return None;
        }
        retained.into()
    } else {
        frames.into()
    };
    if let Some(focus) = &options.focus {
        if !focus_matches(&frames, focus) {
            return None;
        }
    }
    if filters.ignore.is_some()
        && frames
            .iter()
            .any(|f| filters.ignores(f.key, &f.names, &f.lines))
    {
        return None;
    }
    Some(frames)
}

/// The functions a report makes of a frame, innermost first, as its rows name them (jeprof's
/// `TranslateStack` of one address): none above `0x7fffffffffffffff`; a Rust allocator shim
/// inlined into the caller left out unless kept; all but the outermost ` (inline)`; at
/// `--lines`, each followed by its source line.
pub fn frame_functions(frame: &Frame, options: &ReportOptions) -> Vec<String> {
    if frame.key > LAST_USER_ADDRESS {
        return Vec::new();
    }
    if !frame.symbolized {
        let prefixed = frame.names.first().is_some_and(|n| n.starts_with("0x"));
        return vec![if options.lines {
            crate::views::lines::unnamed_with_line(frame.key, prefixed)
        } else {
            unnamed(frame.key, prefixed)
        }];
    }
    let mut first = 0;
    if options.skip.rust_allocator_frames {
        while frame.names.len() - first > 1
            && names::is_uninteresting(&frame.names[first], options.skip)
        {
            first += 1;
        }
    }
    let last = frame.names.len().saturating_sub(1);
    (first..frame.names.len())
        .filter(|&j| !frame.names[j].is_empty())
        .map(|j| {
            let name = &frame.names[j];
            let name = if j < last {
                format!("{name} (inline)")
            } else {
                name.clone()
            };
            if options.lines {
                crate::views::lines::with_line(&name, frame.line(j))
            } else {
                name
            }
        })
        .collect()
}

/// Folded stacks as `jeprof --collapsed` prints them: `root;...;leaf <count>`, one line per distinct
/// stack of addresses after allocator frames are removed (so two call sites of one function give two
/// lines, as in jeprof), full function names, inlined ones suffixed `[inline]`, counts truncated. A
/// stack made only of allocator frames prints as an empty stack, as in jeprof. jeprof prints lines in
/// random order; these are sorted.
///
/// Frames are removed as the text report removes them: allocator frames, and (unless
/// `--keep_alloc_frames`) the allocator functions Rust inlines into an address's innermost names;
/// `--show_from` drops functions toward the root, and then lines that print the same are added
/// up. `--hide` moves no frame here: what flat is charged to shows in a flame graph as the
/// frames above a function, which the hidden ones still are.
pub fn collapsed(profiles: &[ResolvedProfile], options: &ReportOptions) -> Vec<(String, f64)> {
    let mut table: HashMap<Vec<u64>, (String, f64)> = HashMap::new();
    for (p, profile) in profiles.iter().enumerate() {
        for stack in &profile.stacks {
            let (value, _) = options.measure.pick(&stack.counts);
            let Some(frames) = shown_frames(&stack.frames, options) else {
                continue;
            };
            let frames = &frames[..];
            // Addresses only mean the same thing within one dump (or one symbol table).
            let mut key: Vec<u64> = Vec::with_capacity(frames.len() + 1);
            key.push(p as u64);
            key.extend(frames.iter().map(|f| f.key));
            let entry = table.entry(key).or_insert_with(|| {
                let mut names: Vec<String> = Vec::with_capacity(frames.len() + 4);
                // The clean names of the line's functions, innermost first, for `--show_from`.
                let mut clean: Vec<&str> = Vec::with_capacity(frames.len() + 4);
                for f in frames {
                    let last = f.full_names.len().saturating_sub(1);
                    let first = allocator_names_inlined(f, options.skip);
                    for (j, n) in f.full_names.iter().enumerate().skip(first) {
                        // `;` separates frames in the folded format.
                        let n = n.replace(';', ":");
                        names.push(if j < last { format!("{n}[inline]") } else { n });
                        clean.push(f.names.get(j).map_or("", String::as_str));
                    }
                }
                let attribution = &options.attribution;
                let cut =
                    attribution.cut(names.len(), |_| false, |i| attribution.shows_from(clean[i]));
                names.truncate(cut.shown);
                names.reverse();
                (names.join(";"), 0.0)
            });
            entry.1 += value;
        }
    }
    let mut lines: Vec<(String, f64)> = if options.attribution.show_from.is_some() {
        // Stacks that differed only toward the root now print the same.
        let mut merged: HashMap<String, f64> = HashMap::new();
        for (line, value) in table.into_values() {
            *merged.entry(line).or_insert(0.0) += value;
        }
        merged.into_iter().collect()
    } else {
        table.into_values().collect()
    };
    lines.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    lines
}

/// [`collapsed`] of dump files. Folded stacks need every stack's frames with their full names, so
/// each dump is read and resolved whole ([`crate::load_all`]: in memory 10 to 14 times its size),
/// where the text report ([`build_files`]) folds dumps as they are read. Errors name the file (and
/// line) of the first failing dump in `paths` order.
pub fn collapsed_files(
    paths: &[PathBuf],
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Vec<(String, f64)>, Error> {
    let profiles = crate::load_all(paths, symbolize, policy)?;
    Ok(collapsed(&profiles, options))
}

/// The title of a flame graph of `paths` added up: the measure, and the dump or how many.
pub fn flamegraph_title(options: &ReportOptions, paths: &[PathBuf]) -> String {
    match paths {
        [one] => format!("{}: {}", options.measure.name(), one.display()),
        many => format!("{}: {} dumps added up", options.measure.name(), many.len()),
    }
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
) -> Result<(), Error> {
    let folded: Vec<String> = lines
        .iter()
        .filter(|(stack, value)| !stack.is_empty() && *value >= 1.0)
        .map(|(stack, value)| format!("{stack} {}", value.trunc() as u64))
        .collect();
    if folded.is_empty() {
        return Err(Error::NothingToDraw {
            unit: units(options.measure, true),
        });
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
        .map_err(Error::Flamegraph)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve;

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
            let info = t.push_info(&names, &[], true, 0x1000, skip, None);
            let uninteresting = t.infos.uninteresting[info as usize];
            assert!(!uninteresting);
            t.infos
                .ids(info)
                .iter()
                .map(|&id| t.names.get(id).to_string())
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

    #[test]
    fn unparse_and_percent_match_jeprof() {
        assert_eq!(unparse(2161886.25, Measure::InuseSpace, false), "2.1");
        assert_eq!(percent(1332474.0, 2161886.25), "61.6%");
        assert_eq!(percent(0.0, 0.0), "nan");
        assert_eq!(percent(-1.0, 0.0), "-inf");
    }
}
