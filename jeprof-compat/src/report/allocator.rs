//! `report --allocator`: the allocator's figures the dumps carry
//! ([`jeprof_dumpfmt::allocator`]), each process's latest summed over processes, beside those
//! dumps' in-use total, as
//! [`jeprof_dumpfmt::allocator::describe`] prints them (the text the shim's
//! `/debug/pprof/allocator` endpoint serves, so both read the same).

use std::fmt::Write as _;
use std::path::PathBuf;

use jeprof_dumpfmt::allocator::{describe, AllocatorFigures, ALLOCATOR_DUMPS};
use jeprof_dumpfmt::Estimate;

use crate::error::Error;
use crate::input::{read_dump_stacks, series_keys, ReadPolicy};

/// The allocator's figures of one or more dumps: each process's last dump in series order
/// (several dumps of one process are moments of one allocator, which never add up), summed over
/// processes (a fleet merge), and their profiles' in-use total (estimates and variances add: the
/// processes' samples are independent); and, for the processes with several dumps, the change from
/// their first dump to their last.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatorReport {
    /// The figures, summed over the dumps summed.
    pub figures: AllocatorFigures,
    /// The in-use total of the summed dumps' stacks.
    pub inuse: Estimate,
    /// How many dumps were summed (one per process; a merged dump counts the dumps its figures
    /// sum).
    pub dumps: usize,
    /// How many dumps were given.
    pub given: usize,
    /// The change over the series of the processes with several dumps.
    pub change: Option<SeriesChange>,
}

/// The figures of the processes with several dumps at their first and at their last dump, each
/// summed over those processes.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesChange {
    /// How many processes have several dumps.
    pub processes: usize,
    /// Their first dumps' figures, summed.
    pub first: AllocatorFigures,
    /// Their last dumps' figures, summed.
    pub last: AllocatorFigures,
    /// Their first dumps' in-use total.
    pub first_inuse: Estimate,
    /// Their last dumps' in-use total.
    pub last_inuse: Estimate,
}

impl AllocatorReport {
    /// The figures one per line, then their reading ([`describe`]); with several dumps of one
    /// process, first a line saying which dumps were summed and last the change over the series.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if self.given > self.dumps {
            let _ = writeln!(
                out,
                "{} dumps of {} process{} given: the figures and the table are each process's \
                 last dump in series order (a process's dumps are moments of one heap, which do \
                 not add up){}",
                self.given,
                self.dumps,
                if self.dumps == 1 { "" } else { "es" },
                if self.dumps > 1 {
                    ", summed over processes"
                } else {
                    ""
                },
            );
        }
        out.push_str(&describe(&self.figures, Some(&self.inuse), self.dumps));
        if let Some(change) = &self.change {
            out.push_str(&change.text());
        }
        out
    }
}

impl SeriesChange {
    /// One line: each figure's change, then the profile's.
    fn text(&self) -> String {
        let values = |f: &AllocatorFigures| {
            let mut v: Vec<(&str, Option<u64>)> = Vec::new();
            if let Some(j) = &f.jemalloc {
                let names = [
                    "allocated",
                    "active",
                    "resident",
                    "mapped",
                    "retained",
                    "metadata",
                ];
                v.extend(names.into_iter().zip(j.values().map(Some)));
            }
            v.extend([
                ("profiler", Some(f.profiler)),
                ("rss_anon", f.rss_anon),
                ("rss_file", f.rss_file),
            ]);
            v
        };
        let changes: Vec<String> = values(&self.first)
            .into_iter()
            .zip(values(&self.last))
            .filter_map(|((name, a), (_, b))| Some((name, b? as f64 - a? as f64)))
            .map(|(name, d)| format!("{name} {}", signed_mib(d)))
            .collect();
        format!(
            "Change over the series (first dump to last, of the {} process{} with several): {}; \
             the profile's in-use estimate {}.\n",
            self.processes,
            if self.processes == 1 { "" } else { "es" },
            changes.join(", "),
            signed_mib(self.last_inuse.bytes - self.first_inuse.bytes),
        )
    }
}

/// A change in MiB with its sign.
fn signed_mib(bytes: f64) -> String {
    format!("{:+.1} MiB", bytes / (1u64 << 20) as f64)
}

/// The annotation by which jeprof-shim's peak dumps (`dump_peak`, `peak_snapshot()`) are known.
const PEAK_ANNOTATION: &str = "shim_peak_live_bytes";

/// Why a peak dump has no figures.
const PEAK_PROBLEM: &str = "is missing: this is a peak dump, the heap of an earlier moment (its \
     peak), whose allocator figures were not read; take the figures from a dump of the present \
     moment";

/// Reads the figures and the in-use total of each process's last dump (series order,
/// [`jeprof_dumpfmt::series`]), one stack at a time (memory holds no stack), and sums them over
/// processes; and the first and last dumps of the processes with several. A dump without the
/// figures (a raw jemalloc dump, a dump of an older shim, a peak dump) is an error naming the file
/// and the annotation it lacks, as is a set of dumps that mixes jemalloc with another allocator.
pub fn allocator_files(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<AllocatorReport, Error> {
    let groups = jeprof_dumpfmt::series::by_process(&series_keys(paths)?);
    let last: Vec<&PathBuf> = groups
        .iter()
        .filter_map(|g| g.last())
        .map(|&i| &paths[i])
        .collect();
    let (figures, inuse, dumps) = sum_files(&last, policy)?;
    let repeated: Vec<&Vec<usize>> = groups.iter().filter(|g| g.len() > 1).collect();
    let change = if repeated.is_empty() {
        None
    } else {
        let ends = |end: fn(&[usize]) -> Option<&usize>| -> Vec<&PathBuf> {
            repeated
                .iter()
                .filter_map(|g| end(g))
                .map(|&i| &paths[i])
                .collect()
        };
        let (first, first_inuse, _) = sum_files(&ends(<[usize]>::first), policy)?;
        let (last, last_inuse, _) = sum_files(&ends(<[usize]>::last), policy)?;
        Some(SeriesChange {
            processes: repeated.len(),
            first,
            last,
            first_inuse,
            last_inuse,
        })
    };
    Ok(AllocatorReport {
        figures,
        inuse,
        dumps,
        given: paths.len(),
        change,
    })
}

/// The figures and in-use totals of `paths`, summed, and how many dumps the figures sum (a merged
/// dump's `allocator_dumps`, else one each).
fn sum_files(
    paths: &[&PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<(AllocatorFigures, Estimate, usize), Error> {
    let mut sum: Option<AllocatorFigures> = None;
    let mut inuse = Estimate::default();
    let mut dumps = 0;
    for &path in paths {
        let profile = read_dump_stacks(path, policy, |_, stack| inuse.add(&stack.counts.inuse))?;
        let figures = AllocatorFigures::from_annotations(&profile.annotations).map_err(|e| {
            let peak = profile
                .annotations
                .iter()
                .any(|(k, _)| k == PEAK_ANNOTATION);
            match e {
                jeprof_dumpfmt::Error::Annotation { key, .. } if peak => {
                    jeprof_dumpfmt::Error::Annotation {
                        file: Some(path.clone()),
                        key,
                        problem: PEAK_PROBLEM.to_string(),
                    }
                }
                e => e.in_file(path),
            }
        })?;
        dumps += profile
            .annotations
            .iter()
            .find(|(k, _)| k == ALLOCATOR_DUMPS)
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(1);
        match &mut sum {
            None => sum = Some(figures),
            Some(sum) => sum.add(&figures).map_err(|e| e.in_file(path))?,
        }
    }
    Ok((sum.unwrap_or_default(), inuse, dumps))
}
