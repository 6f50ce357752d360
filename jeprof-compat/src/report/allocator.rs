//! `report --allocator`: the allocator's figures the dumps carry
//! ([`jeprof_dumpfmt::allocator`]), summed over the dumps, beside the dumps' in-use total, as
//! [`jeprof_dumpfmt::allocator::describe`] prints them (the text the shim's
//! `/debug/pprof/allocator` endpoint serves, so both read the same).

use std::path::PathBuf;

use jeprof_dumpfmt::allocator::{describe, AllocatorFigures};
use jeprof_dumpfmt::Estimate;

use crate::error::Error;
use crate::input::{read_dump_stacks, ReadPolicy};

/// The allocator's figures of one or more dumps, summed (a fleet merge), and their profiles'
/// in-use total (estimates and variances add: the dumps' samples are independent).
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatorReport {
    /// The figures, summed over the dumps.
    pub figures: AllocatorFigures,
    /// The in-use total of the dumps' stacks.
    pub inuse: Estimate,
    /// How many dumps were summed.
    pub dumps: usize,
}

impl AllocatorReport {
    /// The figures one per line, then their reading ([`describe`]).
    pub fn text(&self) -> String {
        describe(&self.figures, Some(&self.inuse), self.dumps)
    }
}

/// The annotation by which jeprof-shim's peak dumps (`dump_peak`, `peak_snapshot()`) are known.
const PEAK_ANNOTATION: &str = "shim_peak_live_bytes";

/// Why a peak dump has no figures.
const PEAK_PROBLEM: &str = "is missing: this is a peak dump, the heap of an earlier moment (its \
     peak), whose allocator figures were not read; take the figures from a dump of the present \
     moment";

/// Reads the figures and the in-use total of each dump, one stack at a time (memory holds no
/// stack), and sums them. A dump without the figures (a raw jemalloc dump, a dump of an older
/// shim, a peak dump) is an error naming the file and the annotation it lacks, as is a set of
/// dumps that mixes jemalloc with another allocator.
pub fn allocator_files(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<AllocatorReport, Error> {
    let mut sum: Option<AllocatorFigures> = None;
    let mut inuse = Estimate::default();
    for path in paths {
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
        match &mut sum {
            None => sum = Some(figures),
            Some(sum) => sum.add(&figures).map_err(|e| e.in_file(path))?,
        }
    }
    Ok(AllocatorReport {
        figures: sum.unwrap_or_default(),
        inuse,
        dumps: paths.len(),
    })
}
