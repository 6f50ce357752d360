//! Fleet merge: unbias each dump, then add.
//!
//! The reader already turns every entry into jeprof's unbiased figures with the dump's own period,
//! so adding `f64`s across dumps is the "unbias, then sum" order that stays right whatever the mix
//! of periods and sizes (`design-notes.md` §2). What makes stacks from different dumps the same
//! stack is each frame's [`Frame::identity`]: its function names where the dump has symbols (so
//! different builds merge by name), else `module+0xoffset` from the dump's own memory map (so
//! different processes merge whatever ASLR did), else the address.
//!
//! # Algebra
//! An [`Accumulator`] is a map from stack identity to [`Counts`]; [`Accumulator::add`] and
//! [`Accumulator::absorb`] add figures and variances key by key. Addition of reals is associative and
//! commutative, so merging in any grouping or order gives the same result up to floating-point
//! reassociation (tested by a property test); the output period is the smallest non-zero period of
//! the inputs, which is associative too. Memory grows with the number of distinct stacks and frames,
//! not with the number of dumps: each dump is parsed, folded in and dropped.
//!
//! Frames above `0x7fffffffffffffff` (kernel addresses, which jeprof drops from every report) are
//! left out. Per-thread lines and the header thread summaries are not carried over: thread uids mean nothing
//! across processes.

use std::collections::BTreeMap;
use std::sync::Arc;

use jeprof_dumpfmt::{Counts, Profile, Stack, SymbolTable};

use crate::hash::FastMap;
use crate::symbolize::{Frame, ResolvedProfile, ResolvedStack};

/// Synthetic address of the first frame identity in a merged dump; identities are 16 apart.
const SYNTHETIC_BASE: u64 = 0x1_0000;

/// Stacks added up across dumps, keyed by the identity of their frames.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    /// Frame identities (function names innermost first) by id.
    frames: Vec<Arc<[String]>>,
    frame_ids: FastMap<Arc<[String]>, u32>,
    /// Stacks (frame ids, innermost first) and their summed figures.
    stacks: FastMap<Box<[u32]>, Counts>,
    /// Smallest non-zero sample period seen; 0 when every input had period 0.
    period: u64,
    /// How many dumps were added.
    dumps: usize,
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

    fn intern(&mut self, identity: Arc<[String]>) -> u32 {
        if let Some(&id) = self.frame_ids.get(&identity) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(identity.clone());
        self.frame_ids.insert(identity, id);
        id
    }

    fn note_period(&mut self, period: u64) {
        if period != 0 && (self.period == 0 || period < self.period) {
            self.period = period;
        }
    }

    /// Folds one resolved dump in.
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
            for f in stack
                .frames
                .iter()
                .filter(|f| f.key <= 0x7fff_ffff_ffff_ffff)
            {
                let id = match ids.get(&Arc::as_ptr(f)) {
                    Some(&id) => id,
                    None => {
                        let id = self.intern(Arc::from(f.identity()));
                        ids.insert(Arc::as_ptr(f), id);
                        id
                    }
                };
                key.push(id);
            }
            match self.stacks.get_mut(key.as_slice()) {
                Some(c) => c.add(&stack.counts),
                None => {
                    self.stacks
                        .insert(key.clone().into_boxed_slice(), stack.counts);
                }
            }
        }
    }

    /// Adds everything `other` holds (the reduce step of a parallel merge).
    pub fn absorb(&mut self, other: Accumulator) {
        if self.dumps == 0 && self.stacks.is_empty() {
            let period = self.period;
            *self = other;
            self.note_period(period);
            return;
        }
        self.note_period(other.period);
        self.dumps += other.dumps;
        let remap: Vec<u32> = other
            .frames
            .iter()
            .map(|f| self.intern(f.clone()))
            .collect();
        for (stack, counts) in other.stacks {
            let key: Box<[u32]> = stack.iter().map(|&i| remap[i as usize]).collect();
            self.stacks.entry(key).or_default().add(&counts);
        }
    }

    /// The merged stacks by frame identity (innermost first): a canonical form, independent of the
    /// order things were added in.
    pub fn canonical(&self) -> BTreeMap<Vec<Arc<[String]>>, Counts> {
        self.stacks
            .iter()
            .map(|(k, c)| {
                (
                    k.iter().map(|&i| self.frames[i as usize].clone()).collect(),
                    *c,
                )
            })
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
            names: BTreeMap::new(),
        };
        for (rank, &id) in order.iter().enumerate() {
            table
                .names
                .insert(synthetic_address(rank), self.frames[id as usize].to_vec());
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
                Arc::new(Frame {
                    key: synthetic_address(rank),
                    names: self.frames[id as usize].to_vec(),
                    full_names: self.frames[id as usize].to_vec(),
                    symbolized: true,
                    module: None,
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
        }
    }

    /// Frame ids in name order, and stacks sorted by their frames' names.
    fn sorted(&self) -> (Vec<u32>, Vec<(&[u32], Counts)>) {
        let mut order: Vec<u32> = (0..self.frames.len() as u32).collect();
        order.sort_by(|&a, &b| self.frames[a as usize].cmp(&self.frames[b as usize]));
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
