//! The one in-memory heap profile that every reader produces and every writer consumes.
//!
//! All figures are *unbiased estimates* (per-sample weights already applied, see [`crate::math`]),
//! as `f64` so that adding thousands of dumps loses nothing to integer rounding. A figure read from a
//! dump is exactly what jeprof computes for that entry; a figure built by the shim is the sum of its
//! samples' weights.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::math;

/// An unbiased estimate of a number of objects and of bytes, with the variance of each estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    /// Estimated number of objects.
    pub objects: f64,
    /// Estimated number of bytes.
    pub bytes: f64,
    /// Variance of `objects` (Σ over samples of (1 − p)/p²).
    pub objects_variance: f64,
    /// Variance of `bytes` (Σ over samples of Z²(1 − p)/p²).
    pub bytes_variance: f64,
}

impl Estimate {
    /// The estimate for one sampled allocation of `size` bytes at period `period`.
    pub fn of_sample(size: f64, period: f64) -> Estimate {
        let w = math::SampleWeight::of(size, period);
        Estimate {
            objects: w.objects,
            bytes: w.bytes,
            objects_variance: w.objects_variance,
            bytes_variance: w.bytes_variance,
        }
    }

    /// Adds `other` to `self`. Estimates and variances of independent samples both add.
    pub fn add(&mut self, other: &Estimate) {
        self.objects += other.objects;
        self.bytes += other.bytes;
        self.objects_variance += other.objects_variance;
        self.bytes_variance += other.bytes_variance;
    }

    /// Subtracts `other` (a freed sample) from `self`.
    pub fn sub(&mut self, other: &Estimate) {
        self.objects -= other.objects;
        self.bytes -= other.bytes;
        self.objects_variance -= other.objects_variance;
        self.bytes_variance -= other.bytes_variance;
    }

    /// True when the estimate holds nothing.
    pub fn is_zero(&self) -> bool {
        self.objects == 0.0 && self.bytes == 0.0
    }

    /// 95% confidence interval of the byte estimate.
    pub fn bytes_interval_95(&self) -> (f64, f64) {
        math::confidence_interval_95(self.bytes, self.bytes_variance)
    }

    /// 95% confidence interval of the object estimate.
    pub fn objects_interval_95(&self) -> (f64, f64) {
        math::confidence_interval_95(self.objects, self.objects_variance)
    }

    fn is_valid(&self) -> bool {
        let all = [
            self.objects,
            self.bytes,
            self.objects_variance,
            self.bytes_variance,
        ];
        all.iter().all(|v| v.is_finite() && *v >= 0.0)
    }

    fn validate(&self, what: &str) -> Result<(), Error> {
        if !self.is_valid() {
            return Err(Error::Invalid(format!(
                "{what}: every figure must be finite and not negative, got {self:?}"
            )));
        }
        Ok(())
    }
}

/// In-use (live now) and accumulated (allocated since start) estimates: the two pairs of a
/// `t*: <objs>: <bytes> [<objs>: <bytes>]` line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Live objects and bytes.
    pub inuse: Estimate,
    /// Objects and bytes allocated since the profile started (freed ones included).
    pub accum: Estimate,
}

impl Counts {
    /// Adds both pairs of `other`.
    pub fn add(&mut self, other: &Counts) {
        self.inuse.add(&other.inuse);
        self.accum.add(&other.accum);
    }

    /// True when both pairs are zero.
    pub fn is_zero(&self) -> bool {
        self.inuse.is_zero() && self.accum.is_zero()
    }
}

/// One thread's share of a stack, keyed by jemalloc's thread uid (`t<uid>:` lines).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadCounts {
    /// The thread's uid: a process-wide counter, not the OS thread id.
    pub thread: u64,
    /// Its figures under this stack.
    pub counts: Counts,
}

/// One call stack and what is allocated from it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stack {
    /// Frame addresses as the unwinder returned them, innermost first: the first is the exact PC of
    /// the allocation site, the others are return addresses (jeprof subtracts one from those).
    pub frames: Vec<u64>,
    /// The `t*` figures: all threads together.
    pub counts: Counts,
    /// Per-thread figures (may be empty).
    pub threads: Vec<ThreadCounts>,
}

/// A header per-thread summary line (`  t3: … [ … ] worker-1`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSummary {
    /// The thread's uid.
    pub thread: u64,
    /// The thread's totals.
    pub counts: Counts,
    /// The thread's name, if jemalloc printed one.
    pub name: Option<String>,
}

/// Symbol names for code addresses, so jeprof needs no binary (the `--- symbol` section).
///
/// Keys are the addresses *to symbolize*, the ones jeprof looks up after `FixCallerAddresses`: the
/// innermost frame of a stack as written, every caller frame minus one (which lands inside the call
/// instruction). [`Profile::symbol_keys`] lists the keys a profile needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SymbolTable {
    /// The program's name (`binary=` line).
    pub binary: Option<String>,
    /// Address → function names, innermost (inlined) first, the containing function last.
    pub names: BTreeMap<u64, Vec<String>>,
    /// Address → the source position of each of its `names`, in the same order and of the same
    /// length, `None` where unknown; an address missing here has no known positions. Written as
    /// `# line` lines that jeprof ignores (`docs/design.md` §6), so jeprof's reports are the same
    /// with or without them.
    pub lines: BTreeMap<u64, Vec<Option<SourceLine>>>,
}

/// A source position: the file as the compiler recorded it (often relative to the crate or the
/// build directory) and its line, counted from 1.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceLine {
    /// The source file.
    pub file: String,
    /// The line, from 1.
    pub line: u32,
}

impl std::fmt::Display for SourceLine {
    /// `file:line`, as addr2line prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A heap profile: the sample period and, per stack, unbiased figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// Mean sampling period R in bytes (`heap_v2/<R>`). The figures are already unbiased; R is what
    /// jeprof will scale with, and what variance and intervals were computed against.
    pub sample_period: u64,
    /// Stacks, in no particular order. Several entries may share frames (jeprof adds them up);
    /// [`Profile::coalesce`] merges them.
    pub stacks: Vec<Stack>,
    /// The header's per-thread lines, when known.
    pub threads: Vec<ThreadSummary>,
    /// Symbols for the frames, if the profile carries them.
    pub symbols: Option<SymbolTable>,
    /// The `MAPPED_LIBRARIES:` text (the process's `/proc/self/maps`), if any.
    pub mapped_libraries: Option<String>,
    /// `key: value` notes written as `# key: value` comment lines, which jeprof and other readers
    /// ignore (the shim records dropped samples there).
    pub annotations: Vec<(String, String)>,
    /// In-use figures per scope and stack, when the producer recorded scopes (written as
    /// `# scope` comment lines, which jeprof ignores; see [`crate::scopes`]).
    pub scopes: Vec<ScopeStack>,
    /// Labels naming where the profile comes from (`program`, `build_id`, `hostname`, `pid`,
    /// `service`, `time`, or any a pipeline adds), in order, keys unique and `[A-Za-z0-9_.-]+`,
    /// values without line breaks. Written as `# label <key> <value>` comment lines, which jeprof
    /// ignores; see [`crate::labels`].
    pub labels: Vec<(String, String)>,
}

/// One scope's in-use figures at one stack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopeStack {
    /// The scope's label.
    pub scope: String,
    /// The stack's frames, as in [`Stack::frames`].
    pub frames: Vec<u64>,
    /// What the scope's live samples at that stack stand for.
    pub inuse: Estimate,
}

impl Profile {
    /// An empty profile with period `sample_period`.
    pub fn new(sample_period: u64) -> Profile {
        Profile {
            sample_period,
            ..Profile::default()
        }
    }

    /// Sum of every stack's figures (the `t*` header line, before encoding).
    pub fn totals(&self) -> Counts {
        let mut total = Counts::default();
        for s in &self.stacks {
            total.add(&s.counts);
        }
        total
    }

    /// The header's per-thread lines made from the stacks: each thread's figures summed over the
    /// stacks (in stack order), sorted by thread uid, without names.
    pub fn thread_summaries(&self) -> Vec<ThreadSummary> {
        let mut threads: Vec<ThreadSummary> = Vec::new();
        for stack in &self.stacks {
            for t in &stack.threads {
                match threads.iter_mut().find(|x| x.thread == t.thread) {
                    Some(x) => x.counts.add(&t.counts),
                    None => threads.push(ThreadSummary {
                        thread: t.thread,
                        counts: t.counts,
                        name: None,
                    }),
                }
            }
        }
        threads.sort_by_key(|t| t.thread);
        threads
    }

    /// Adds up entries that share the same frames (as jeprof does), keeping first-seen order.
    pub fn coalesce(&mut self) {
        let mut index: std::collections::HashMap<Vec<u64>, usize> =
            std::collections::HashMap::with_capacity(self.stacks.len());
        let mut merged: Vec<Stack> = Vec::with_capacity(self.stacks.len());
        for stack in std::mem::take(&mut self.stacks) {
            match index.get(&stack.frames) {
                Some(&i) => {
                    let target = &mut merged[i];
                    target.counts.add(&stack.counts);
                    for t in stack.threads {
                        match target.threads.iter_mut().find(|x| x.thread == t.thread) {
                            Some(x) => x.counts.add(&t.counts),
                            None => target.threads.push(t),
                        }
                    }
                }
                None => {
                    index.insert(stack.frames.clone(), merged.len());
                    merged.push(stack);
                }
            }
        }
        self.stacks = merged;
    }

    /// The addresses jeprof will look up in a symbol section: each stack's first frame as written
    /// and every other frame minus one, deduplicated and sorted.
    pub fn symbol_keys(&self) -> Vec<u64> {
        let mut keys: Vec<u64> = self
            .stacks
            .iter()
            .flat_map(|s| s.frames.iter().enumerate().map(|(i, &a)| symbol_key(i, a)))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Checks the invariants every writer relies on: figures finite and not negative, a positive
    /// byte count wherever there are objects and the reverse, and labels that can be written
    /// ([`crate::labels`]).
    pub fn validate(&self) -> Result<(), Error> {
        crate::labels::validate(&self.labels)?;
        for (i, s) in self.stacks.iter().enumerate() {
            validate_stack(i, s)?;
        }
        Ok(())
    }
}

/// [`Profile::validate`] for the stack at `index` (the streaming reader checks each stack as it
/// completes).
pub(crate) fn validate_stack(index: usize, s: &Stack) -> Result<(), Error> {
    // Only formatted when a figure is wrong: the reader checks millions of stacks.
    let what = || format!("stack {index}");
    let figures = std::iter::once(&s.counts).chain(s.threads.iter().map(|t| &t.counts));
    for counts in figures {
        if !(counts.inuse.is_valid() && counts.accum.is_valid()) {
            counts.inuse.validate(&what())?;
            counts.accum.validate(&what())?;
        }
    }
    Ok(())
}

/// jeprof's lookup key for frame `index` of a stack whose frame is `address`.
pub fn symbol_key(index: usize, address: u64) -> u64 {
    if index == 0 {
        address
    } else {
        address.wrapping_sub(1)
    }
}
