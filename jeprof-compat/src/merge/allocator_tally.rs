//! The allocator's figures across a merge ([`jeprof_dumpfmt::allocator`]): what the merged dump
//! says of the memory beside its profile.
//!
//! Dumps of different processes are different allocators, whose figures add up; dumps of one
//! process are moments of one allocator, which do not (two dumps of a 1 GiB heap are not 2 GiB).
//! So, as `report --allocator` does over files, the tally keeps each process's latest dump (by its
//! `time` label, else the later in input order) and sums over processes. A dump names its process
//! by its `pid` and `hostname` labels; a dump without a `pid` label (a merged dump, whose inputs'
//! pids differ) is a process of its own, and carries its inputs' count in [`ALLOCATOR_DUMPS`].
//!
//! The merged dump carries the sum only when every input carried figures of the same kind of
//! allocator; otherwise it says why in [`ALLOCATOR_LOST`], which `report --allocator` quotes, so
//! the user learns which step lost the figures instead of being told to take the dumps again.
//!
//! Keeping the latest per process and summing are associative and commutative up to that order
//! (a later chunk of the input wins ties), so a merge of merges is the merge of everything.

use std::collections::BTreeMap;

use jeprof_dumpfmt::allocator::{AllocatorFigures, ALLOCATOR_DUMPS, ALLOCATOR_LOST};
use jeprof_dumpfmt::series::Process;

/// One process's latest figures.
#[derive(Debug, Clone)]
struct Latest {
    /// The dump's `time` label, microseconds since 1970.
    time: Option<i64>,
    figures: AllocatorFigures,
    /// How many processes' dumps `figures` sums (more than one for a merged input).
    dumps: usize,
}

impl Latest {
    /// Whether `later` (added after `self`) replaces it: its time is not earlier, or either has
    /// none.
    fn replaced_by(&self, later: &Latest) -> bool {
        match (self.time, later.time) {
            (Some(a), Some(b)) => b >= a,
            _ => true,
        }
    }
}

/// The allocator's figures of the dumps a merge has added.
#[derive(Debug, Clone, Default)]
pub(super) struct AllocatorTally {
    /// Each named process's latest figures.
    processes: BTreeMap<Process, Latest>,
    /// The figures of dumps without a process (merged inputs), summed.
    unnamed: Option<Latest>,
    /// Dumps added with no figures (a raw jemalloc dump, an older dump, a peak dump).
    without: usize,
    /// Dumps added.
    dumps: usize,
    /// The first reason given by an input that was itself a merge which lost its figures.
    inherited: Option<String>,
    /// Whether figures of jemalloc and of another allocator met.
    mixed: bool,
}

impl AllocatorTally {
    /// Notes one dump's figures, from its labels and annotations.
    pub(super) fn note(&mut self, labels: &[(String, String)], annotations: &[(String, String)]) {
        self.dumps += 1;
        let get = |key: &str| {
            annotations
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.trim())
        };
        let Ok(figures) = AllocatorFigures::from_annotations(annotations) else {
            self.without += 1;
            if self.inherited.is_none() {
                self.inherited = get(ALLOCATOR_LOST).map(str::to_string);
            }
            return;
        };
        let latest = Latest {
            time: jeprof_dumpfmt::labels::get(labels, "time")
                .and_then(jeprof_dumpfmt::labels::parse_rfc3339),
            figures,
            dumps: get(ALLOCATOR_DUMPS)
                .and_then(|v| v.parse().ok())
                .unwrap_or(1),
        };
        match Process::of(labels, None) {
            Some(process) => self.keep_latest(process, latest),
            None => self.add_unnamed(latest),
        }
    }

    fn keep_latest(&mut self, process: Process, latest: Latest) {
        match self.processes.get_mut(&process) {
            Some(old) if !old.replaced_by(&latest) => {}
            Some(old) => *old = latest,
            None => {
                self.processes.insert(process, latest);
            }
        }
    }

    fn add_unnamed(&mut self, latest: Latest) {
        match &mut self.unnamed {
            None => self.unnamed = Some(latest),
            Some(sum) => {
                if sum.figures.add(&latest.figures).is_err() {
                    self.mixed = true;
                }
                sum.dumps += latest.dumps;
            }
        }
    }

    /// Adds the tally of dumps that came after these in the input (a later chunk of the merge).
    pub(super) fn absorb(&mut self, later: AllocatorTally) {
        for (process, latest) in later.processes {
            self.keep_latest(process, latest);
        }
        if let Some(unnamed) = later.unnamed {
            self.add_unnamed(unnamed);
        }
        self.without += later.without;
        self.dumps += later.dumps;
        self.inherited = self.inherited.take().or(later.inherited);
        self.mixed |= later.mixed;
    }

    /// The merged dump's annotations: the summed figures and [`ALLOCATOR_DUMPS`] when every input
    /// carried figures of one kind of allocator, else [`ALLOCATOR_LOST`] saying why; none for a
    /// merge of no dumps.
    pub(super) fn annotations(&self) -> Vec<(String, String)> {
        if self.dumps == 0 {
            return Vec::new();
        }
        let lost = |why: String| vec![(ALLOCATOR_LOST.to_string(), why)];
        if self.without > 0 {
            let mut why = format!(
                "merge: {} of the {} dumps merged carried no allocator figures (a raw jemalloc \
                 dump, a dump of an older jeprof-shim or a peak dump), so the merged dump \
                 carries none",
                self.without, self.dumps
            );
            if let Some(inherited) = &self.inherited {
                why.push_str(&format!("; one of them said: {inherited}"));
            }
            return lost(why);
        }
        let mut sum: Option<Latest> = self.unnamed.clone();
        let mut mixed = self.mixed;
        for latest in self.processes.values() {
            match &mut sum {
                None => sum = Some(latest.clone()),
                Some(sum) => {
                    mixed |= sum.figures.add(&latest.figures).is_err();
                    sum.dumps += latest.dumps;
                }
            }
        }
        if mixed {
            return lost(
                "merge: the dumps merged mix jemalloc with another allocator, whose figures do \
                 not add up"
                    .to_string(),
            );
        }
        let Some(sum) = sum else {
            return Vec::new();
        };
        let mut out = sum.figures.to_annotations();
        out.push((ALLOCATOR_DUMPS.to_string(), sum.dumps.to_string()));
        out
    }
}
