//! Fleet merge: unbias each dump, then add.
//!
//! The reader already turns every entry into jeprof's unbiased figures with the dump's own period,
//! so adding `f64`s across dumps is the "unbias, then sum" order that stays right whatever the mix
//! of periods and sizes (`docs/design.md` §2). What makes stacks from different dumps the same
//! stack is each frame's [`Frame::identity`]: its function names where the dump has symbols (so
//! different builds merge by name), else `module+0xoffset` from the dump's own memory map (so
//! different processes merge whatever ASLR did), else the address.
//!
//! # Algebra
//! An [`Accumulator`] is a map from stack identity to [`Counts`]; [`Accumulator::add`] and
//! [`Accumulator::absorb`] add figures and variances key by key. Addition of reals is associative and
//! commutative, so merging in any grouping or order gives the same result up to floating-point
//! reassociation (a relative 1e-12 or so; tested by property tests, which also merge written-out
//! partial merges); the output period is the smallest non-zero period of the inputs, which is
//! associative too. Variances add because the dumps' samples are independent. So a merge of merges
//! is the merge of everything: a fleet can be merged per host or rack, the partial dumps shipped,
//! and those merged (`docs/design.md` §15). Up to the rounding of a heap_v2 dump's integers: a
//! partial written as heap_v2 keeps each stack's figures to the writer's rounding
//! ([`OutputRounding`]), its variances as its figures at its own period imply, and no thread lines.
//!
//! # Streaming
//! [`merge_stream`] reads the dumps' names as it goes ([`expand`]: arguments, directories, lists of
//! any length) and folds each dump in as it is read, then drops it: memory grows with the number of
//! distinct stacks, names and frames, never with the number of dumps. [`merge_files`] is the same
//! merge over a list in memory, bit for bit.
//!
//! # Fast path
//! [`Accumulator::add_dump`] (what [`merge_stream`] uses) folds a parsed dump in without building
//! [`Frame`]s: names and frame identities are interned to ids (stacks are hashed as ids, never as
//! strings), each distinct address of a dump is resolved once, walking the symbol section in its own
//! order (the translation engine of [`crate::symbolize`], which [`resolve`] takes too), and each
//! distinct symbol entry is demangled and cleaned once per merge (cached by its raw names). It
//! applies the same identity rules as [`Frame::identity`] and equals `add(&resolve(..))`
//! (property-tested), for raw dumps as for dumps with a symbol section.
//!
//! # Output
//! [`Accumulator::to_profile`] is the merged dump; [`OutputRounding`] is how its figures become
//! heap_v2's integers ([`OutputRounding::write_options`]).
//!
//! # Labels
//! The merged dump keeps the labels ([`Profile::labels`]: program, build id, host, pid…) on which
//! every input agrees, and names the others in a `# dropped_labels: host,pid` annotation
//! ([`DROPPED_LABELS`]), which a merge of merged dumps carries on: labels merge by intersection
//! and dropped keys by union, both associative, so a tree reduce ends with the same labels.
//!
//! Frames above `0x7fffffffffffffff` (kernel addresses, which jeprof drops from every report) are
//! left out. Per-thread lines and the header thread summaries are not carried over: thread uids mean nothing
//! across processes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use jeprof_dumpfmt::write::HeaderPeriod;
use jeprof_dumpfmt::{Counts, Profile, Rounding, Stack, SymbolTable, WriteOptions};

use crate::binary;
use crate::error::Error;
use crate::hash::FastMap;
use crate::input::{read_dump, MemoryMap, ReadPolicy};
use crate::names::NameStyle;
use crate::symbolize::keys::{
    entry_names, name_keys, EntryLines, Found, KeyIndex, KeyNames, LAST_USER_ADDRESS,
};
#[cfg(doc)]
use crate::symbolize::resolve;
use crate::symbolize::{
    unsymbolized_identity, Frame, ResolvedProfile, ResolvedStack, SymbolizeOptions,
};

/// Synthetic address of the first frame identity in a merged dump; identities are 16 apart.
const SYNTHETIC_BASE: u64 = 0x1_0000;

/// Stacks added up across dumps, keyed by the identity of their frames.
///
/// Names are interned once (`names`), a frame identity is the list of its name ids (`frames`), a
/// stack the list of its frame ids: hashing and comparing ids, never strings, per stack.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    /// Distinct function names (and `module+0xoffset` / address identities) by id.
    names: Vec<Arc<str>>,
    name_ids: FastMap<Arc<str>, u32>,
    /// Frame identities (name ids, innermost first) by id.
    frames: Vec<Box<[u32]>>,
    frame_ids: FastMap<Box<[u32]>, u32>,
    /// Stacks (frame ids, innermost first) and their summed figures.
    stacks: FastMap<Box<[u32]>, Counts>,
    /// Smallest non-zero sample period seen; 0 when every input had period 0.
    period: u64,
    /// How many dumps were added.
    dumps: usize,
    /// [`Accumulator::add_dump`]'s cache: a symbol-section entry's raw names (as written in the
    /// dump) to the frame id they resolve to under `raw_style`, so each distinct entry is demangled
    /// and cleaned once per merge, not once per dump. Bounded by the distinct entries.
    raw_frames: FastMap<Box<[String]>, u32>,
    raw_style: Option<NameStyle>,
    /// How many of `names` and `frames` went out in earlier [`Partial`]s (a worker's accumulator).
    shipped_names: usize,
    shipped_frames: usize,
    /// The labels on which every dump folded in by [`Accumulator::add_dump`] agrees (same key,
    /// same value), in the first dump's order; `None` before the first.
    labels: Option<Vec<(String, String)>>,
    /// Keys of labels the dumps disagree on (a different value, or present in some only), and
    /// those the inputs' own `# dropped_labels` annotations name (merges of merges).
    dropped_labels: BTreeSet<String>,
}

/// The annotation in which a merged dump names the labels its inputs disagreed on:
/// `# dropped_labels: host,pid` (keys sorted, comma-separated: keys never hold a comma).
pub const DROPPED_LABELS: &str = "dropped_labels";

/// One chunk's figures from a worker of [`merge_stream`], in that worker's ids, with the names and
/// frames it interned since its previous chunk (ids continuing from those).
struct Partial {
    worker: usize,
    labels: Option<Vec<(String, String)>>,
    dropped_labels: BTreeSet<String>,
    names: Vec<Arc<str>>,
    frames: Vec<Box<[u32]>>,
    stacks: FastMap<Box<[u32]>, Counts>,
    period: u64,
    dumps: usize,
}

/// A worker's name and frame ids as the result's ids, built up chunk by chunk (the reducer
/// absorbs a worker's chunks in the order the worker made them, so each chunk's new ids follow on).
#[derive(Default)]
struct Translation {
    names: Vec<u32>,
    frames: Vec<u32>,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Number of dumps folded in.
    pub fn dumps(&self) -> usize {
        self.dumps
    }

    /// Number of distinct stacks.
    pub fn distinct_stacks(&self) -> usize {
        self.stacks.len()
    }

    fn intern_name(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        let name: Arc<str> = Arc::from(name);
        self.names.push(name.clone());
        self.name_ids.insert(name, id);
        id
    }

    /// The frame id of an identity given as name ids.
    fn intern_frame(&mut self, identity: &[u32]) -> u32 {
        if let Some(&id) = self.frame_ids.get(identity) {
            return id;
        }
        let id = self.frames.len() as u32;
        let identity: Box<[u32]> = identity.into();
        self.frames.push(identity.clone());
        self.frame_ids.insert(identity, id);
        id
    }

    /// The frame id of an identity given as names ([`Frame::identity`]).
    fn intern_identity<S: AsRef<str>>(&mut self, identity: &[S]) -> u32 {
        let ids: Vec<u32> = identity
            .iter()
            .map(|n| self.intern_name(n.as_ref()))
            .collect();
        self.intern_frame(&ids)
    }

    /// Folds in the labels of one dump or of a group of dumps merged already (`None`: no dump
    /// with labels information, which changes nothing), with the keys that group dropped: the
    /// agreed labels are the intersection of (key, value) pairs, every key lost from it or never in
    /// it is dropped. Intersection and union are associative and commutative, so any grouping of a
    /// merge ends with the same labels.
    fn note_labels(&mut self, labels: Option<&[(String, String)]>, dropped: BTreeSet<String>) {
        let mut dropped = dropped;
        self.dropped_labels.append(&mut dropped);
        let Some(labels) = labels else {
            return;
        };
        match &mut self.labels {
            None => self.labels = Some(labels.to_vec()),
            Some(agreed) => {
                for (key, value) in labels {
                    if !agreed.iter().any(|(k, v)| k == key && v == value) {
                        self.dropped_labels.insert(key.clone());
                    }
                }
                agreed.retain(|(key, value)| {
                    let kept = labels.iter().any(|(k, v)| k == key && v == value);
                    if !kept {
                        self.dropped_labels.insert(key.clone());
                    }
                    kept
                });
            }
        }
        if let Some(agreed) = &mut self.labels {
            agreed.retain(|(key, _)| !self.dropped_labels.contains(key));
        }
    }

    /// The labels every dump agrees on, in the first dump's order.
    pub fn labels(&self) -> &[(String, String)] {
        self.labels.as_deref().unwrap_or_default()
    }

    /// The keys of the labels that were dropped because the dumps disagreed on them, sorted.
    pub fn dropped_labels(&self) -> impl Iterator<Item = &str> {
        self.dropped_labels.iter().map(String::as_str)
    }

    fn note_period(&mut self, period: u64) {
        if period != 0 && (self.period == 0 || period < self.period) {
            self.period = period;
        }
    }

    /// Adds one stack, given as frame ids.
    fn add_stack(&mut self, key: &[u32], counts: &Counts) {
        match self.stacks.get_mut(key) {
            Some(c) => c.add(counts),
            None => {
                self.stacks.insert(key.into(), *counts);
            }
        }
    }

    /// Folds one resolved dump in. A resolved profile carries no labels: the result's labels are
    /// those of the dumps added with [`Accumulator::add_dump`].
    pub fn add(&mut self, profile: &ResolvedProfile) {
        self.note_period(profile.sample_period);
        self.dumps += 1;
        // Frames are shared per address within a dump: compute each identity once.
        let mut ids: FastMap<*const Frame, u32> = FastMap::default();
        let mut key: Vec<u32> = Vec::with_capacity(64);
        for stack in &profile.stacks {
            key.clear();
            // Kernel addresses: jeprof drops them from every report, and their synthetic
            // replacements would not be dropped.
            for f in stack.frames.iter().filter(|f| f.key <= LAST_USER_ADDRESS) {
                let id = match ids.get(&Arc::as_ptr(f)) {
                    Some(&id) => id,
                    None => {
                        let id = self.intern_identity(&f.identity());
                        ids.insert(Arc::as_ptr(f), id);
                        id
                    }
                };
                key.push(id);
            }
            self.add_stack(&key, &stack.counts);
        }
    }

    /// Folds one parsed dump in: the same as `self.add(&resolve(profile, source, options))` (for
    /// any `source`: the merge does not keep it), going straight from addresses to frame ids
    /// without building [`Frame`]s: each distinct address is named once per dump by the pass
    /// [`resolve`] takes too ([`crate::symbolize`]), and each distinct symbol entry demangled and
    /// cleaned once per merge.
    ///
    /// Its labels ([`Profile::labels`]) are kept where every dump so far agrees, the others
    /// dropped ([`Accumulator::labels`], [`Accumulator::dropped_labels`]); the keys a merged input
    /// names in its `# dropped_labels` annotation ([`DROPPED_LABELS`]) stay dropped.
    pub fn add_dump(&mut self, profile: Profile, options: &SymbolizeOptions) {
        let dropped = profile
            .annotations
            .iter()
            .filter(|(key, _)| key == DROPPED_LABELS)
            .flat_map(|(_, keys)| keys.split(','))
            .filter(|key| !key.is_empty())
            .map(String::from)
            .collect();
        self.note_labels(Some(&profile.labels), dropped);
        if self.raw_style != Some(options.style) {
            self.raw_frames.clear();
            self.raw_style = Some(options.style);
        }
        self.note_period(profile.sample_period);
        self.dumps += 1;
        // Every distinct lookup key named once ([`name_keys`]), as a frame id. Kernel addresses are
        // left out: jeprof drops them from every report, and their synthetic replacements would
        // not be dropped.
        let mut index = KeyIndex::default();
        index.rebuild(&profile, |k| k <= LAST_USER_ADDRESS);
        let map = MemoryMap::of(&profile);
        let mut identities = Identities {
            accumulator: self,
            style: options.style,
            map: &map,
        };
        let frame_of = name_keys(&profile, &mut index, options, &map, &mut identities);
        // The stacks as frame ids, added up.
        for local in &mut index.flat {
            *local = frame_of[*local as usize];
        }
        for (stack, ids) in profile.stacks.iter().zip(index.stacks()) {
            self.add_stack(ids, &stack.counts);
        }
    }

    /// The frame id of a symbol-section entry: its names as [`resolve`] gives them
    /// ([`entry_names`]), through the per-merge cache.
    fn symbol_frame(&mut self, raw: &[String], style: NameStyle) -> u32 {
        if let Some(&id) = self.raw_frames.get(raw) {
            return id;
        }
        let id = self.intern_identity(&entry_names(raw, style));
        self.raw_frames.insert(raw.into(), id);
        id
    }

    /// Moves the figures out into a [`Partial`] (with the names and frames interned since the
    /// previous one), leaving this accumulator empty of figures but keeping its interned names,
    /// frames and symbol cache for the next dumps: a parallel merge's worker hands its chunks over
    /// this way without starting each chunk cold, and without shipping its whole tables each time.
    fn take_partial(&mut self, worker: usize) -> Partial {
        let capacity = self.stacks.len();
        let partial = Partial {
            worker,
            labels: self.labels.take(),
            dropped_labels: std::mem::take(&mut self.dropped_labels),
            names: self.names[self.shipped_names..].to_vec(),
            frames: self.frames[self.shipped_frames..].to_vec(),
            stacks: std::mem::replace(
                &mut self.stacks,
                FastMap::with_capacity_and_hasher(capacity, Default::default()),
            ),
            period: std::mem::take(&mut self.period),
            dumps: std::mem::take(&mut self.dumps),
        };
        self.shipped_names = self.names.len();
        self.shipped_frames = self.frames.len();
        partial
    }

    /// Adds a worker's [`Partial`], translating its ids through what that worker shipped before
    /// (`translation`, extended here): the same sums as [`Accumulator::absorb`] of the chunk.
    fn absorb_partial(&mut self, translation: &mut Translation, partial: Partial) {
        self.note_labels(partial.labels.as_deref(), partial.dropped_labels);
        self.note_period(partial.period);
        self.dumps += partial.dumps;
        for name in &partial.names {
            let id = self.intern_name(name);
            translation.names.push(id);
        }
        let mut ids: Vec<u32> = Vec::with_capacity(8);
        for frame in &partial.frames {
            ids.clear();
            ids.extend(frame.iter().map(|&n| translation.names[n as usize]));
            let id = self.intern_frame(&ids);
            translation.frames.push(id);
        }
        let mut key: Vec<u32> = Vec::with_capacity(64);
        for (stack, counts) in &partial.stacks {
            key.clear();
            key.extend(stack.iter().map(|&i| translation.frames[i as usize]));
            self.add_stack(&key, counts);
        }
    }

    /// Adds everything `other` holds (the reduce step of a parallel merge).
    pub fn absorb(&mut self, mut other: Accumulator) {
        if self.dumps == 0 && self.stacks.is_empty() && self.labels.is_none() {
            let period = self.period;
            other.dropped_labels.append(&mut self.dropped_labels);
            *self = other;
            self.note_period(period);
            return;
        }
        self.note_labels(
            other.labels.as_deref(),
            std::mem::take(&mut other.dropped_labels),
        );
        self.note_period(other.period);
        self.dumps += other.dumps;
        let names: Vec<u32> = other.names.iter().map(|n| self.intern_name(n)).collect();
        let frames: Vec<u32> = other
            .frames
            .iter()
            .map(|f| {
                let ids: Vec<u32> = f.iter().map(|&n| names[n as usize]).collect();
                self.intern_frame(&ids)
            })
            .collect();
        let mut key: Vec<u32> = Vec::with_capacity(64);
        for (stack, counts) in &other.stacks {
            key.clear();
            key.extend(stack.iter().map(|&i| frames[i as usize]));
            self.add_stack(&key, counts);
        }
    }

    /// A frame identity as names.
    fn identity(&self, frame: u32) -> Vec<String> {
        self.frames[frame as usize]
            .iter()
            .map(|&n| self.names[n as usize].to_string())
            .collect()
    }

    /// The merged stacks by frame identity (innermost first): a canonical form, independent of the
    /// order things were added in.
    pub fn canonical(&self) -> BTreeMap<Vec<Arc<[String]>>, Counts> {
        let frames: Vec<Arc<[String]>> = (0..self.frames.len() as u32)
            .map(|f| Arc::from(self.identity(f)))
            .collect();
        self.stacks
            .iter()
            .map(|(k, c)| (k.iter().map(|&i| frames[i as usize].clone()).collect(), *c))
            .collect()
    }

    /// The output period: the smallest non-zero period of the inputs.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The merged profile as a symbolized dump model: every frame identity gets a synthetic address
    /// (written as is for a leaf and plus one for callers, so jeprof's lookup key is always that
    /// address) and a symbol-table entry with its names. Deterministic: identities and stacks are
    /// numbered in sorted order.
    pub fn to_profile(&self) -> Profile {
        let (order, stacks) = self.sorted();
        let mut profile = Profile::new(self.period);
        let mut table = SymbolTable {
            binary: Some("jeprof-compat-merge".to_string()),
            ..SymbolTable::default()
        };
        for (rank, &id) in order.iter().enumerate() {
            table
                .names
                .insert(synthetic_address(rank), self.identity(id));
        }
        let rank_of = ranks(&order);
        for (key, counts) in stacks {
            let frames = key
                .iter()
                .enumerate()
                .map(|(i, &id)| {
                    let a = synthetic_address(rank_of[id as usize]);
                    if i == 0 {
                        a
                    } else {
                        a + 1
                    }
                })
                .collect();
            profile.stacks.push(Stack {
                frames,
                counts,
                threads: Vec::new(),
            });
        }
        profile.symbols = Some(table);
        profile.labels = self.labels().to_vec();
        if !self.dropped_labels.is_empty() {
            let keys: Vec<&str> = self.dropped_labels().collect();
            profile
                .annotations
                .push((DROPPED_LABELS.to_string(), keys.join(",")));
        }
        profile
    }

    /// The merged profile as a resolved profile (for pprof output and reports).
    pub fn to_resolved(&self, source: &str) -> ResolvedProfile {
        let (order, stacks) = self.sorted();
        let rank_of = ranks(&order);
        let frames: Vec<Arc<Frame>> = order
            .iter()
            .enumerate()
            .map(|(rank, &id)| {
                let names = self.identity(id);
                Arc::new(Frame {
                    key: synthetic_address(rank),
                    full_names: names.clone(),
                    names,
                    symbolized: true,
                    module: None,
                    lines: Vec::new(),
                })
            })
            .collect();
        ResolvedProfile {
            source: source.to_string(),
            sample_period: self.period,
            stacks: stacks
                .into_iter()
                .map(|(key, counts)| ResolvedStack {
                    frames: key
                        .iter()
                        .map(|&id| frames[rank_of[id as usize]].clone())
                        .collect(),
                    counts,
                })
                .collect(),
            mappings: Vec::new(),
            labels: Vec::new(),
            build_ids: Vec::new(),
        }
    }

    /// Frame ids in name order, and stacks sorted by their frames' names.
    fn sorted(&self) -> (Vec<u32>, Vec<(&[u32], Counts)>) {
        // Identities in the order of their names (lexicographic over the name lists): names are
        // distinct, so comparing their ranks compares the strings.
        let mut by_name: Vec<u32> = (0..self.names.len() as u32).collect();
        by_name.sort_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
        let name_rank = ranks(&by_name);
        let mut order: Vec<u32> = (0..self.frames.len() as u32).collect();
        order.sort_by(|&a, &b| {
            self.frames[a as usize]
                .iter()
                .map(|&n| name_rank[n as usize])
                .cmp(
                    self.frames[b as usize]
                        .iter()
                        .map(|&n| name_rank[n as usize]),
                )
        });
        let rank_of = ranks(&order);
        let mut stacks: Vec<(&[u32], Counts)> =
            self.stacks.iter().map(|(k, c)| (&**k, *c)).collect();
        stacks.sort_by(|a, b| {
            a.0.iter()
                .map(|&i| rank_of[i as usize])
                .cmp(b.0.iter().map(|&i| rank_of[i as usize]))
        });
        (order, stacks)
    }
}

/// [`Accumulator::add_dump`]'s side of the translation engine: a frame id per key, by the rules of
/// [`Frame::identity`] (names where there are some, else `module+0xoffset`, else the address).
struct Identities<'a, 'm> {
    accumulator: &'a mut Accumulator,
    style: NameStyle,
    map: &'m MemoryMap<'m>,
}

impl<'p> KeyNames<'p> for Identities<'_, '_> {
    fn entry(&mut self, _key: u64, raw: &'p [String], _lines: EntryLines<'p>) -> u32 {
        self.accumulator.symbol_frame(raw, self.style)
    }

    fn found(&mut self, _key: u64, found: Found) -> u32 {
        self.accumulator.intern_identity(&found.names)
    }

    fn unnamed(&mut self, key: u64, _prefixed: bool) -> u32 {
        let identity = unsymbolized_identity(key, self.map.module(key));
        self.accumulator.intern_identity(&[identity])
    }
}

fn ranks(order: &[u32]) -> Vec<usize> {
    let mut rank_of = vec![0usize; order.len()];
    for (rank, &id) in order.iter().enumerate() {
        rank_of[id as usize] = rank;
    }
    rank_of
}

fn synthetic_address(rank: usize) -> u64 {
    SYNTHETIC_BASE + 16 * rank as u64
}

/// Dumps per unit of work in [`merge_stream`]: small enough that no worker idles long at the end,
/// large enough that handing a unit over (and adding it in) costs little.
const MERGE_CHUNK: usize = 16;

/// Merges dump files: [`merge_stream`] over a list held in memory.
pub fn merge_files(
    paths: &[PathBuf],
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
    jobs: usize,
    on_dump: &(dyn Fn() + Sync),
) -> Result<Accumulator, Error> {
    merge_stream(
        paths.iter().cloned().map(Ok),
        options,
        policy,
        jobs,
        on_dump,
    )
}

/// Keeps the failure of the earliest dump (in input order).
fn note_error(first_error: &mut Option<(usize, Error)>, i: usize, e: Error) {
    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
        *first_error = Some((i, e));
    }
}

/// What a worker of [`merge_stream`] hands back for one chunk.
enum Done {
    Chunk(usize, Partial),
    /// The chunk's dump at this index (in input order) failed; the chunk's figures are dropped.
    Failed(usize, usize, Error),
    /// The worker panicked (a bug: input never makes the library panic); re-raised by the caller.
    Panicked(Box<dyn std::any::Any + Send>),
}

/// Merges the dumps `inputs` names, reading the names as it goes: memory holds the result (its
/// distinct stacks, names and frames), each worker's tables of the same, one dump in flight per
/// worker and at most `2 × jobs` chunks' figures, whatever the number of dumps. An error from
/// `inputs` (a list that cannot be read) counts as the failure of the dump at its place.
///
/// How: the calling thread reads `inputs`, cuts them into chunks of 16 consecutive dumps and hands
/// the chunks, in order, through a bounded channel to `jobs` workers (never more than `2 × jobs`
/// chunks handed out and not yet added in). A worker folds its chunk's dumps one at a time and in
/// order into the chunk's own figures ([`Accumulator::add_dump`]; names, frames and the symbol cache
/// stay with the worker from chunk to chunk, and a chunk carries only the ones new since that
/// worker's previous chunk), then sends them back; the calling thread adds the chunks to the result
/// in chunk order. So figures are summed in the same order whatever `jobs` and the timing: the
/// result is reproducible bit for bit, and the same as [`merge_files`] on the same list.
/// `on_dump` is called after each dump is folded in (for a progress bar). On errors, the error of
/// the first failing dump in input order is returned.
pub fn merge_stream<I>(
    inputs: I,
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
    jobs: usize,
    on_dump: &(dyn Fn() + Sync),
) -> Result<Accumulator, Error>
where
    I: IntoIterator<Item = Result<PathBuf, Error>>,
{
    let workers = jobs.max(1);
    // Chunks handed out and not yet added in: each worker's current one and one waiting for it.
    let window = 2 * workers;
    let (work_tx, work_rx) = mpsc::sync_channel::<(usize, usize, Vec<PathBuf>)>(window);
    let work_rx = Mutex::new(work_rx);
    let (done_tx, done_rx) = mpsc::sync_channel::<Done>(window);
    // Dumps at or after the first failure are not started: every earlier one already was (chunks
    // are handed out in order, dumps read in order), so the failure reported is the first in
    // input order.
    let stop = AtomicUsize::new(usize::MAX);
    let worker = |worker: usize, done_tx: mpsc::SyncSender<Done>| {
        let mut acc = Accumulator::new();
        let work = || loop {
            let next = work_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            // The sender is gone: every chunk was handed out.
            let Ok((chunk, first, paths)) = next else {
                return;
            };
            let mut failed = None;
            for (i, path) in (first..).zip(&paths) {
                // Ordering: a hint to stop early, paired with nothing; the error itself goes back
                // through the channel.
                if i >= stop.load(Ordering::Relaxed) {
                    break;
                }
                let read = read_dump(path, policy)
                    .map_err(Error::from)
                    .and_then(|profile| {
                        binary::check(&profile, path, options.binary.as_ref())?;
                        Ok(profile)
                    });
                match read {
                    Ok(profile) => {
                        acc.add_dump(profile, options);
                        on_dump();
                    }
                    Err(e) => {
                        // Ordering: as the load above.
                        stop.fetch_min(i, Ordering::Relaxed);
                        failed = Some((i, e));
                        break;
                    }
                }
            }
            // A chunk cut short by another's failure is sent too: the caller counts every chunk
            // back, and adds none after a failure.
            let partial = acc.take_partial(worker);
            let done = match failed {
                Some((i, e)) => Done::Failed(chunk, i, e),
                None => Done::Chunk(chunk, partial),
            };
            if done_tx.send(done).is_err() {
                return;
            }
        };
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            let _ = done_tx.send(Done::Panicked(panic));
        }
    };
    std::thread::scope(|scope| {
        for w in 0..workers {
            let done_tx = done_tx.clone();
            let worker = &worker;
            scope.spawn(move || worker(w, done_tx));
        }
        drop(done_tx);
        let mut inputs = inputs.into_iter();
        let mut total = Accumulator::new();
        let mut translations: Vec<Translation> =
            (0..workers).map(|_| Translation::default()).collect();
        let mut first_error: Option<(usize, Error)> = None;
        // Chunks handed out (`sent`), added in (`added`), and back but waiting for their turn
        // (`None`: failed).
        let (mut sent, mut added) = (0usize, 0usize);
        let mut waiting: BTreeMap<usize, Option<Partial>> = BTreeMap::new();
        let mut next_dump = 0usize;
        let mut exhausted = false;
        loop {
            while !exhausted && first_error.is_none() && sent - added < window {
                let first = next_dump;
                let mut paths = Vec::with_capacity(MERGE_CHUNK);
                while paths.len() < MERGE_CHUNK {
                    match inputs.next() {
                        Some(Ok(path)) => paths.push(path),
                        Some(Err(e)) => {
                            note_error(&mut first_error, first + paths.len(), e);
                            exhausted = true;
                            break;
                        }
                        None => {
                            exhausted = true;
                            break;
                        }
                    }
                }
                next_dump += paths.len();
                if paths.is_empty() {
                    break;
                }
                // Never blocks: the channel holds `window` chunks, and fewer are out.
                if work_tx.send((sent, first, paths)).is_err() {
                    break;
                }
                sent += 1;
            }
            if added == sent {
                break;
            }
            match done_rx.recv() {
                Ok(Done::Chunk(chunk, partial)) => {
                    waiting.insert(chunk, Some(partial));
                }
                Ok(Done::Failed(chunk, i, e)) => {
                    note_error(&mut first_error, i, e);
                    waiting.insert(chunk, None);
                }
                Ok(Done::Panicked(panic)) => std::panic::resume_unwind(panic),
                // Every worker is gone with chunks outstanding: only a panic does that, and the
                // scope re-raises it.
                Err(_) => break,
            }
            while let Some(partial) = waiting.remove(&added) {
                if let (Some(partial), None) = (partial, &first_error) {
                    let translation = &mut translations[partial.worker];
                    total.absorb_partial(translation, partial);
                }
                added += 1;
            }
        }
        drop(work_tx);
        match first_error {
            Some((_, e)) => Err(e),
            None => Ok(total),
        }
    })
}

/// Where a merge's dumps come from ([`expand`] reads them in order).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// A dump.
    Path(PathBuf),
    /// A directory of dumps: its regular files (symbolic links followed) whose names do not start
    /// with `.`, sorted by name; subdirectories are not entered. Hidden names are left out because
    /// writers that rename into place keep their unfinished files under them (this project's
    /// `merge -o` writes `.<name>.<random>.tmp`), and a directory of dumps is often still being
    /// written to.
    Dir(PathBuf),
    /// A file listing dumps, one path per line (`-`: standard input), read as the merge goes;
    /// white space around a path is dropped, and blank lines and lines starting with `#` are
    /// skipped. Relative paths are relative to the current directory, as for arguments.
    List(PathBuf),
}

/// The dumps `inputs` name, in order, read only as the merge asks for them: a list of 100,000
/// dumps is never held in memory (a directory's names are, to sort them). After an error (a list
/// or directory that cannot be read, a line that is not UTF-8) the iterator ends.
pub fn expand(inputs: Vec<Input>) -> impl Iterator<Item = Result<PathBuf, Error>> {
    Expand {
        inputs: inputs.into(),
        current: Current::Nothing,
    }
}

/// How many dumps `inputs` name, reading each list and directory once (so their errors come
/// before any dump is read); `None` when a list is standard input, which cannot be read twice.
pub fn count(inputs: &[Input]) -> Result<Option<u64>, Error> {
    let mut total = 0u64;
    for input in inputs {
        match input {
            Input::Dir(dir) => total += directory_files(dir)?.len() as u64,
            Input::Path(_) => total += 1,
            Input::List(list) if is_stdin(list) => return Ok(None),
            Input::List(list) => {
                let mut lines = ListLines::open(list)?;
                while lines.next_path().transpose()?.is_some() {
                    total += 1;
                }
            }
        }
    }
    Ok(Some(total))
}

fn is_stdin(list: &std::path::Path) -> bool {
    list.as_os_str() == "-"
}

/// A directory's dumps, as [`Input::Dir`] says.
fn directory_files(dir: &std::path::Path) -> Result<Vec<PathBuf>, Error> {
    let unreadable = |e: std::io::Error| Error::InputList {
        list: dir.to_path_buf(),
        line: None,
        reason: format!("cannot read the directory: {e}"),
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path();
        let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
        // `metadata` follows a link, so a link to a dump is taken and a dangling one is not.
        if !hidden && std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push(path);
        }
    }
    files.sort_unstable();
    Ok(files)
}

/// The paths of a list file, line by line.
struct ListLines {
    list: PathBuf,
    reader: Box<dyn std::io::BufRead>,
    line_number: usize,
    buffer: Vec<u8>,
}

impl ListLines {
    fn open(list: &std::path::Path) -> Result<ListLines, Error> {
        let reader: Box<dyn std::io::BufRead> = if is_stdin(list) {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            let file = std::fs::File::open(list).map_err(|e| Error::InputList {
                list: list.to_path_buf(),
                line: None,
                reason: format!("cannot read the list of dumps: {e}"),
            })?;
            Box::new(std::io::BufReader::new(file))
        };
        Ok(ListLines {
            list: list.to_path_buf(),
            reader,
            line_number: 0,
            buffer: Vec::new(),
        })
    }

    /// The next path listed, `None` at the end.
    fn next_path(&mut self) -> Option<Result<PathBuf, Error>> {
        loop {
            self.buffer.clear();
            let error = |list: &std::path::Path, line, reason| Error::InputList {
                list: list.to_path_buf(),
                line: Some(line),
                reason,
            };
            match self.reader.read_until(b'\n', &mut self.buffer) {
                Ok(0) => return None,
                Ok(_) => self.line_number += 1,
                Err(e) => {
                    return Some(Err(error(
                        &self.list,
                        self.line_number + 1,
                        format!("cannot read the list of dumps: {e}"),
                    )))
                }
            }
            let Ok(text) = std::str::from_utf8(&self.buffer) else {
                return Some(Err(error(
                    &self.list,
                    self.line_number,
                    "not UTF-8; list one path per line".to_string(),
                )));
            };
            let text = text.trim();
            if !text.is_empty() && !text.starts_with('#') {
                return Some(Ok(PathBuf::from(text)));
            }
        }
    }
}

/// [`expand`]'s iterator.
struct Expand {
    inputs: std::collections::VecDeque<Input>,
    current: Current,
}

enum Current {
    Nothing,
    Files(std::vec::IntoIter<PathBuf>),
    Lines(ListLines),
    /// After an error.
    Failed,
}

impl Iterator for Expand {
    type Item = Result<PathBuf, Error>;

    fn next(&mut self) -> Option<Result<PathBuf, Error>> {
        loop {
            let next = match &mut self.current {
                Current::Failed => return None,
                Current::Nothing => None,
                Current::Files(files) => files.next().map(Ok),
                Current::Lines(lines) => lines.next_path(),
            };
            match next {
                Some(Err(e)) => {
                    self.current = Current::Failed;
                    return Some(Err(e));
                }
                Some(Ok(path)) => return Some(Ok(path)),
                None => {}
            }
            self.current = match self.inputs.pop_front()? {
                Input::Dir(dir) => match directory_files(&dir) {
                    Ok(files) => Current::Files(files.into_iter()),
                    Err(e) => {
                        self.current = Current::Failed;
                        return Some(Err(e));
                    }
                },
                Input::Path(path) => return Some(Ok(path)),
                Input::List(list) => match ListLines::open(&list) {
                    Ok(lines) => Current::Lines(lines),
                    Err(e) => {
                        self.current = Current::Failed;
                        return Some(Err(e));
                    }
                },
            };
        }
    }
}

/// How a merged heap_v2 dump's figures become the integers jemalloc's format holds, R being its
/// header period (the smallest input period): the writer's choices ([`WriteOptions`]) the
/// `jeprof-compat merge --rounding` options stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OutputRounding {
    /// The entries whose jeprof figures are closest to the merged figures at period R (up to three
    /// per stack).
    #[default]
    Optimal,
    /// As [`OutputRounding::Optimal`], also trying header periods R/2 to R/64: the most accurate,
    /// and can be ten times slower.
    Best,
    /// jemalloc's own rounding, one entry per stack: the fastest, the least accurate.
    Nearest,
}

impl OutputRounding {
    /// The writer's options for this choice.
    pub fn write_options(self) -> WriteOptions {
        match self {
            // Optimal entries at R, the smallest input period (measured on 10 merged fleet dumps:
            // worst error 7e-5 in bytes, 3e-5 in objects per function).
            OutputRounding::Optimal => WriteOptions {
                header_period: HeaderPeriod::Sampling,
                ..WriteOptions::default()
            },
            OutputRounding::Best => WriteOptions::default(),
            OutputRounding::Nearest => WriteOptions {
                rounding: Rounding::Nearest,
                header_period: HeaderPeriod::Sampling,
                ..WriteOptions::default()
            },
        }
    }
}
