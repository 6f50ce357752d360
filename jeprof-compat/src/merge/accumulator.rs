//! The accumulator: stacks added up across dumps, keyed by the identity of their frames, with
//! names and frame identities interned to ids; each dump folded in through the translation
//! engine; a worker's partial figures absorbed into the result; the merged dump.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jeprof_dumpfmt::{Counts, Profile, Stack, SymbolTable};

use super::allocator_tally::AllocatorTally;
use crate::hash::FastMap;
use crate::input::MemoryMap;
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
    /// The allocator's figures of the dumps folded in by [`Accumulator::add_dump`].
    allocator: AllocatorTally,
}

/// The annotation in which a merged dump names the labels its inputs disagreed on:
/// `# dropped_labels: host,pid` (keys sorted, comma-separated: keys never hold a comma).
pub const DROPPED_LABELS: &str = "dropped_labels";

/// One chunk's figures from a worker of [`merge_stream`], in that worker's ids, with the names and
/// frames it interned since its previous chunk (ids continuing from those).
pub(super) struct Partial {
    pub(super) worker: usize,
    labels: Option<Vec<(String, String)>>,
    dropped_labels: BTreeSet<String>,
    names: Vec<Arc<str>>,
    frames: Vec<Box<[u32]>>,
    stacks: FastMap<Box<[u32]>, Counts>,
    period: u64,
    dumps: usize,
    /// Boxed: a chunk's message stays small.
    allocator: Box<AllocatorTally>,
}

/// A worker's name and frame ids as the result's ids, built up chunk by chunk (the reducer
/// absorbs a worker's chunks in the order the worker made them, so each chunk's new ids follow on).
#[derive(Default)]
pub(super) struct Translation {
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

    /// Folds one resolved dump in. A resolved profile carries no labels and no annotations: the
    /// result's labels are those of the dumps added with [`Accumulator::add_dump`], and the merged
    /// dump says that the allocator's figures were lost.
    pub fn add(&mut self, profile: &ResolvedProfile) {
        self.note_period(profile.sample_period);
        self.dumps += 1;
        // A resolved profile keeps no annotations: the merged dump says the figures were lost.
        self.allocator.note(&profile.labels, &[]);
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
        self.allocator.note(&profile.labels, &profile.annotations);
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
    pub(super) fn take_partial(&mut self, worker: usize) -> Partial {
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
            allocator: Box::new(std::mem::take(&mut self.allocator)),
        };
        self.shipped_names = self.names.len();
        self.shipped_frames = self.frames.len();
        partial
    }

    /// Adds a worker's [`Partial`], translating its ids through what that worker shipped before
    /// (`translation`, extended here): the same sums as [`Accumulator::absorb`] of the chunk.
    pub(super) fn absorb_partial(&mut self, translation: &mut Translation, partial: Partial) {
        self.note_labels(partial.labels.as_deref(), partial.dropped_labels);
        self.note_period(partial.period);
        self.dumps += partial.dumps;
        self.allocator.absorb(*partial.allocator);
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
        self.allocator.absorb(std::mem::take(&mut other.allocator));
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
        profile.annotations.extend(self.allocator.annotations());
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
