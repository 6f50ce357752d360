//! `report --rss`: where the resident memory is, per site ([`jeprof_dumpfmt::rss`]): each
//! function's in-use, resident, swapped and stranded slab bytes, charged as the text report
//! charges in-use bytes (the same engine, so a function's in-use here is its flat figure there),
//! then the reconciliation of the process's RSS with these parts
//! ([`jeprof_dumpfmt::rss::reconcile`]).
//!
//! Each figure is a per-stack estimate with its variance, so the per-function sums and their
//! intervals are made as the in-use ones are: the dump's stacks with the figure in place of their
//! in-use bytes, through [`build_dumps`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use jeprof_dumpfmt::allocator::AllocatorFigures;
use jeprof_dumpfmt::math::confidence_interval_95;
use jeprof_dumpfmt::rss::{reconcile, ByteEstimate, RssFigures, SiteRss, PAGE_SIZE};
use jeprof_dumpfmt::{Estimate, Profile};

use super::{build_dumps, Measure, ReportOptions};
use crate::error::Error;
use crate::input::{read_dump, ReadPolicy};
use crate::symbolize::SymbolizeOptions;

/// One function's figures: each an estimate with its variance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RssRow {
    /// The function charged, as the text report names it.
    pub function: String,
    /// Its in-use bytes (its flat figure in the text report).
    pub inuse: ByteEstimate,
    /// Resident bytes of its live objects.
    pub resident: ByteEstimate,
    /// Swapped bytes of its live objects.
    pub swapped: ByteEstimate,
    /// Stranded slab bytes charged to it; `None` without jemalloc.
    pub fragmentation: Option<ByteEstimate>,
}

/// A dump's residency report.
#[derive(Debug, Clone, PartialEq)]
pub struct RssReport {
    /// Per function, by in-use bytes, largest first.
    pub rows: Vec<RssRow>,
    /// The dump's residency figures.
    pub figures: RssFigures,
    /// The dump's allocator figures (RSS, jemalloc's metadata, the profiler's bytes).
    pub allocator: AllocatorFigures,
    /// The dump's in-use total.
    pub inuse: Estimate,
}

/// What an error says of a dump without residency figures.
const MISSING: &str = "is missing: dumps of jeprof-shim and libjeprof_preload.so carry the \
     residency figures (setting `rss`, on by default); a raw jemalloc dump, an older dump or a \
     dump taken with rss:false does not";

/// Reads `path` whole and makes its residency report, functions charged as `options` says (its
/// measure is taken as in-use space).
pub fn rss_file(
    path: &Path,
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<RssReport, Error> {
    let profile = read_dump(path, policy)?;
    let in_file = |e: jeprof_dumpfmt::Error| e.in_file(path);
    let figures = RssFigures::from_annotations(&profile.annotations)
        .map_err(in_file)?
        .ok_or_else(|| jeprof_dumpfmt::Error::Annotation {
            file: Some(path.to_path_buf()),
            key: PAGE_SIZE.to_string(),
            problem: MISSING.to_string(),
        })?;
    let allocator = AllocatorFigures::from_annotations(&profile.annotations).map_err(in_file)?;
    let source = path.display().to_string();
    Ok(rss_profile(
        profile, figures, allocator, &source, symbolize, options,
    ))
}

/// [`rss_file`] of a parsed dump.
pub fn rss_profile(
    profile: Profile,
    figures: RssFigures,
    allocator: AllocatorFigures,
    source: &str,
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
) -> RssReport {
    let options = ReportOptions {
        measure: Measure::InuseSpace,
        nodecount: None,
        ..options.clone()
    };
    let by_frames: HashMap<&[u64], &SiteRss> = figures
        .sites
        .iter()
        .map(|s| (s.frames.as_slice(), s))
        .collect();
    let inuse = profile.totals().inuse;
    let jemalloc = figures.slabs.is_some();
    // The dump's stacks with one figure in place of their in-use bytes, charged per function.
    let per_function = |pick: &dyn Fn(&SiteRss) -> ByteEstimate| -> HashMap<String, ByteEstimate> {
        let mut p = profile.clone();
        for s in &mut p.stacks {
            let e = by_frames
                .get(s.frames.as_slice())
                .map_or_else(ByteEstimate::default, |site| pick(site));
            s.counts.inuse = Estimate {
                objects: if e.bytes > 0.0 { 1.0 } else { 0.0 },
                bytes: e.bytes,
                objects_variance: 0.0,
                bytes_variance: e.variance,
            };
            s.threads.clear();
        }
        let report = build_dumps(&[(p, source.to_string())], symbolize, &options);
        report
            .rows
            .into_iter()
            .map(|r| {
                let e = ByteEstimate {
                    bytes: r.flat,
                    variance: r.flat_variance,
                };
                (r.name, e)
            })
            .collect()
    };
    let inuse_rows = build_dumps(
        &[(profile.clone(), source.to_string())],
        symbolize,
        &options,
    );
    let resident = per_function(&|s| s.resident);
    let swapped = per_function(&|s| s.swapped);
    let stranded = per_function(&|s| s.stranded.unwrap_or_default());
    let mut rows: Vec<RssRow> = inuse_rows
        .rows
        .into_iter()
        .filter(|r| r.flat > 0.0)
        .map(|r| {
            let get =
                |m: &HashMap<String, ByteEstimate>| m.get(&r.name).copied().unwrap_or_default();
            RssRow {
                inuse: ByteEstimate {
                    bytes: r.flat,
                    variance: r.flat_variance,
                },
                resident: get(&resident),
                swapped: get(&swapped),
                fragmentation: jemalloc.then(|| get(&stranded)),
                function: r.name,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.inuse
            .bytes
            .total_cmp(&a.inuse.bytes)
            .then_with(|| a.function.cmp(&b.function))
    });
    RssReport {
        rows,
        figures,
        allocator,
        inuse,
    }
}

impl RssReport {
    /// The table (per function: in-use, resident with its 95% interval, swapped, stranded; MiB
    /// with one decimal, or bytes with `show_bytes`), a blank line, then the reconciliation.
    pub fn text(&self, show_bytes: bool) -> String {
        let figure = |b: f64| {
            if show_bytes {
                format!("{b:.0}")
            } else {
                format!("{:.1}", b / (1u64 << 20) as f64)
            }
        };
        let unit = if show_bytes { "B" } else { "MiB" };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>12} {:>12} {:>25} {:>12} {:>12}  function ({unit}; resident's 95% interval)",
            "in-use", "resident", "", "swapped", "stranded"
        );
        for r in &self.rows {
            let (lo, hi) = r.resident.interval_95();
            let stranded = r
                .fragmentation
                .map_or_else(|| "-".to_string(), |f| figure(f.bytes));
            let _ = writeln!(
                out,
                "{:>12} {:>12} {:>25} {:>12} {:>12}  {}",
                figure(r.inuse.bytes),
                figure(r.resident.bytes),
                format!("[{}, {}]", figure(lo), figure(hi)),
                figure(r.swapped.bytes),
                stranded,
                r.function
            );
        }
        if self.figures.slabs.is_none() {
            out.push_str(
                "stranded: absent, the program's allocator is not jemalloc (its per-bin \
                 statistics are what the stranded slab bytes are made of)\n",
            );
        }
        out.push('\n');
        out.push_str(&reconcile(&self.figures, &self.allocator, &self.inuse));
        out
    }

    /// The report as JSON: `sites` (per function `function`, `inuse_bytes`, `resident_bytes`,
    /// `swapped_bytes`, `fragmentation_bytes` (null without jemalloc), each figure's `_lo` and
    /// `_hi`, the 95% interval), and `totals`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let interval = |e: &ByteEstimate| confidence_interval_95(e.bytes, e.variance);
        let sites: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let (ilo, ihi) = interval(&r.inuse);
                let (rlo, rhi) = interval(&r.resident);
                let (slo, shi) = interval(&r.swapped);
                let fragmentation = r.fragmentation.map(|f| {
                    let (lo, hi) = interval(&f);
                    (f.bytes, lo, hi)
                });
                json!({
                    "function": r.function,
                    "inuse_bytes": r.inuse.bytes,
                    "inuse_bytes_lo": ilo,
                    "inuse_bytes_hi": ihi,
                    "resident_bytes": r.resident.bytes,
                    "resident_bytes_lo": rlo,
                    "resident_bytes_hi": rhi,
                    "swapped_bytes": r.swapped.bytes,
                    "swapped_bytes_lo": slo,
                    "swapped_bytes_hi": shi,
                    "fragmentation_bytes": fragmentation.map(|f| f.0),
                    "fragmentation_bytes_lo": fragmentation.map(|f| f.1),
                    "fragmentation_bytes_hi": fragmentation.map(|f| f.2),
                })
            })
            .collect();
        let slabs = self.figures.slabs.as_ref();
        json!({
            "page_size": self.figures.page_size,
            "pagemap": match &self.figures.pagemap {
                Ok(()) => "read".to_string(),
                Err(why) => format!("unreadable: {why}"),
            },
            "sites": sites,
            "totals": {
                "inuse_bytes": self.inuse.bytes,
                "resident_bytes": self.figures.sites.iter().map(|s| s.resident.bytes).sum::<f64>(),
                "swapped_bytes": self.figures.sites.iter().map(|s| s.swapped.bytes).sum::<f64>(),
                "stranded_bytes": slabs.map(|s| s.stranded_bytes()),
                "dirty_bytes": slabs.map(|s| s.dirty_bytes),
                "muzzy_bytes": slabs.map(|s| s.muzzy_bytes),
                "allocator_metadata_bytes": self.allocator.jemalloc.map(|j| j.metadata),
                "profiler_bytes": self.allocator.profiler,
                "rss_anon_bytes": self.allocator.rss_anon,
            },
            "stranded": if slabs.is_some() {
                "jemalloc's per-bin statistics"
            } else {
                "absent: the program's allocator is not jemalloc"
            },
        })
    }
}
