//! The allocator's figures at the moment of a dump, and their reading: where the memory went that
//! the heap profile does not show.
//!
//! jeprof-shim and libjeprof_preload.so write them into every dump as annotations
//! (`# <key>: <value>`, which jeprof skips; pprof comments in pprof output), in bytes:
//!
//! | annotation | what it is |
//! |---|---|
//! | `allocator` | `jemalloc` when the program's heap is the jemalloc the profiler reads, else `other` |
//! | `allocator_allocated` | jemalloc's `stats.allocated`: bytes in blocks the application holds, at their size class (blocks freed into a thread cache count until the cache returns them) |
//! | `allocator_active` | `stats.active`: bytes in pages holding those blocks, a multiple of the page size, ≥ allocated |
//! | `allocator_resident` | `stats.resident`: bytes in resident data pages mapped by the allocator (active pages, dirty unused pages, metadata pages), ≥ active; an upper bound (untouched pages count) |
//! | `allocator_mapped` | `stats.mapped`: bytes in the extents in use, ≥ active; no order with resident (dirty pages of unused extents count in resident only) |
//! | `allocator_retained` | `stats.retained`: virtual memory kept for reuse instead of being returned to the system: address space, not resident |
//! | `allocator_metadata` | `stats.metadata`: the allocator's own bookkeeping (base allocations and internal blocks) |
//! | `profiler_bytes` | the profiler's own memory (its tables, the sampled arena's overhead; the shim documents what it counts) |
//! | `process_rss_anon`, `process_rss_file` | `RssAnon` and `RssFile` of `/proc/self/status` (kB × 1024) |
//! | `allocator_dumps` | in a merged dump: how many dumps the figures sum (each process's latest) |
//! | `allocator_lost` | in a merged dump without figures: why (an input had none, or inputs mixed allocators) |
//!
//! The `allocator_*` figures appear only with `allocator: jemalloc`: with another allocator the
//! profiler's jemalloc holds only its own sampled arena, whose figures would describe nothing of
//! the program's heap. [`describe`] prints the figures one per line and reads them in plain words;
//! it is what `jeprof-compat report --allocator` prints after its table and what the shim's
//! `/debug/pprof/allocator` endpoint serves.

use std::fmt::Write as _;

use crate::error::Error;
use crate::model::Estimate;

/// The annotation naming the allocator: [`JEMALLOC`] or [`OTHER`].
pub const ALLOCATOR: &str = "allocator";
/// [`ALLOCATOR`]'s value when the program's heap is the profiler's jemalloc.
pub const JEMALLOC: &str = "jemalloc";
/// [`ALLOCATOR`]'s value for any other allocator (the system's, mimalloc, ...).
pub const OTHER: &str = "other";
/// The annotation of [`AllocatorFigures::profiler`].
pub const PROFILER_BYTES: &str = "profiler_bytes";
/// The annotation of [`AllocatorFigures::rss_anon`].
pub const PROCESS_RSS_ANON: &str = "process_rss_anon";
/// The annotation of [`AllocatorFigures::rss_file`].
pub const PROCESS_RSS_FILE: &str = "process_rss_file";
/// The annotation in which a merged dump says how many dumps (one per process: a process's dumps
/// are moments of one allocator, which do not add up) its figures sum.
pub const ALLOCATOR_DUMPS: &str = "allocator_dumps";
/// The annotation in which a merged dump says why it carries no figures (an input had none):
/// [`AllocatorFigures::from_annotations`] quotes it, so the user learns which step lost them.
pub const ALLOCATOR_LOST: &str = "allocator_lost";

/// The six jemalloc figures: their annotation keys and the names [`describe`] prints, in order.
pub const JEMALLOC_FIGURES: [(&str, &str); 6] = [
    ("allocator_allocated", "allocated"),
    ("allocator_active", "active"),
    ("allocator_resident", "resident"),
    ("allocator_mapped", "mapped"),
    ("allocator_retained", "retained"),
    ("allocator_metadata", "metadata"),
];

/// jemalloc's `stats.*` figures, in bytes (see the module's table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JemallocFigures {
    /// `stats.allocated`.
    pub allocated: u64,
    /// `stats.active`.
    pub active: u64,
    /// `stats.resident`.
    pub resident: u64,
    /// `stats.mapped`.
    pub mapped: u64,
    /// `stats.retained`.
    pub retained: u64,
    /// `stats.metadata`.
    pub metadata: u64,
}

impl JemallocFigures {
    /// The figures in [`JEMALLOC_FIGURES`]' order.
    pub fn values(&self) -> [u64; 6] {
        [
            self.allocated,
            self.active,
            self.resident,
            self.mapped,
            self.retained,
            self.metadata,
        ]
    }

    fn from_values(v: [u64; 6]) -> JemallocFigures {
        JemallocFigures {
            allocated: v[0],
            active: v[1],
            resident: v[2],
            mapped: v[3],
            retained: v[4],
            metadata: v[5],
        }
    }
}

/// What a dump says about the memory beside its profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorFigures {
    /// jemalloc's figures, `None` when the allocator is not jemalloc (`allocator: other`).
    pub jemalloc: Option<JemallocFigures>,
    /// The profiler's own memory, in bytes.
    pub profiler: u64,
    /// The process's anonymous resident memory (`RssAnon`), in bytes, when known.
    pub rss_anon: Option<u64>,
    /// The process's file-backed resident memory (`RssFile`), in bytes, when known.
    pub rss_file: Option<u64>,
}

impl AllocatorFigures {
    /// The figures as annotations, in the order [`describe`] prints them.
    pub fn to_annotations(&self) -> Vec<(String, String)> {
        let kind = if self.jemalloc.is_some() {
            JEMALLOC
        } else {
            OTHER
        };
        let mut out = vec![(ALLOCATOR.to_string(), kind.to_string())];
        if let Some(j) = &self.jemalloc {
            for ((key, _), value) in JEMALLOC_FIGURES.iter().zip(j.values()) {
                out.push((key.to_string(), value.to_string()));
            }
        }
        out.push((PROFILER_BYTES.to_string(), self.profiler.to_string()));
        for (key, value) in [
            (PROCESS_RSS_ANON, self.rss_anon),
            (PROCESS_RSS_FILE, self.rss_file),
        ] {
            if let Some(value) = value {
                out.push((key.to_string(), value.to_string()));
            }
        }
        out
    }

    /// The figures a dump's annotations carry. An [`Error::Annotation`] names the first annotation
    /// missing (a raw jemalloc dump or an older dump has none of them) or not readable as a
    /// number of bytes.
    pub fn from_annotations(annotations: &[(String, String)]) -> Result<AllocatorFigures, Error> {
        let find = |key: &str| {
            annotations
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let bytes = |key: &'static str| -> Result<Option<u64>, Error> {
            find(key)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        Error::annotation(key, format!("is `{v}`, not a number of bytes"))
                    })
                })
                .transpose()
        };
        let required = |key: &'static str| -> Result<u64, Error> {
            bytes(key)?.ok_or_else(|| Error::annotation(key, MISSING))
        };
        let jemalloc = match find(ALLOCATOR).map(str::trim) {
            None => {
                return Err(match find(ALLOCATOR_LOST) {
                    Some(why) => {
                        Error::annotation(ALLOCATOR, format!("is missing: {}", why.trim()))
                    }
                    None => Error::annotation(ALLOCATOR, MISSING),
                })
            }
            Some(JEMALLOC) => {
                let mut values = [0u64; 6];
                for (slot, (key, _)) in values.iter_mut().zip(JEMALLOC_FIGURES) {
                    *slot = required(key)?;
                }
                Some(JemallocFigures::from_values(values))
            }
            Some(OTHER) => None,
            Some(other) => {
                return Err(Error::annotation(
                    ALLOCATOR,
                    format!("is `{other}`, neither `{JEMALLOC}` nor `{OTHER}`"),
                ))
            }
        };
        Ok(AllocatorFigures {
            jemalloc,
            profiler: required(PROFILER_BYTES)?,
            rss_anon: bytes(PROCESS_RSS_ANON)?,
            rss_file: bytes(PROCESS_RSS_FILE)?,
        })
    }

    /// Adds `other`'s figures to these (a fleet merge: the memory of several processes, or of one
    /// process's dumps taken apart, summed). Both must name the same kind of allocator; an RSS
    /// figure stays only if both have it.
    pub fn add(&mut self, other: &AllocatorFigures) -> Result<(), Error> {
        self.jemalloc = match (self.jemalloc, other.jemalloc) {
            (Some(a), Some(b)) => {
                let (a, b) = (a.values(), b.values());
                Some(JemallocFigures::from_values(std::array::from_fn(|i| {
                    a[i].saturating_add(b[i])
                })))
            }
            (None, None) => None,
            _ => {
                return Err(Error::annotation(
                    ALLOCATOR,
                    format!(
                        "differs between the dumps (`{JEMALLOC}` and `{OTHER}`): figures of \
                         different allocators do not add up"
                    ),
                ))
            }
        };
        self.profiler = self.profiler.saturating_add(other.profiler);
        let sum = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        self.rss_anon = sum(self.rss_anon, other.rss_anon);
        self.rss_file = sum(self.rss_file, other.rss_file);
        Ok(())
    }
}

/// What an [`Error::Annotation`] says of a missing figure, and how to get it.
const MISSING: &str = "is missing: only dumps written by this version of jeprof-shim or \
     libjeprof_preload.so carry the allocator's figures (a raw jemalloc dump or an older dump does \
     not); take the dump with one of them";

/// The figures, one per line as `<name>: <bytes> B` (`allocated`, `active`, `resident`,
/// `mapped`, `retained`, `metadata` when the allocator is jemalloc, then `profiler`, then
/// `rss_anon` and `rss_file` when known), then a short reading in plain words:
///
/// - how much of what the program holds the profile covers: `inuse` (the profile's in-use total,
///   when given) against jemalloc's `allocated` less the profiler's own bytes, with `inuse`'s 95%
///   interval;
/// - fragmentation: `active − allocated`, as a share of `active` (pages held for blocks not fully
///   used);
/// - resident beyond active: `resident − active` (dirty pages not yet returned to the system, and
///   the allocator's metadata);
/// - retained: virtual memory kept for reuse, which costs address space, not memory;
/// - the profiler's share of `allocated` (or of the RSS for another allocator), and how much of
///   the anonymous RSS is not jemalloc's resident memory (thread stacks, other allocators).
///
/// `dumps` is how many dumps the figures sum (a fleet merge, said in a first line when above 1).
pub fn describe(figures: &AllocatorFigures, inuse: Option<&Estimate>, dumps: usize) -> String {
    let mut out = String::new();
    if dumps > 1 {
        let _ = writeln!(
            out,
            "figures summed over {dumps} dumps (a fleet merge: each is one process's allocator at \
             the moment of its dump)"
        );
    }
    write_raw_figures(&mut out, figures);
    match &figures.jemalloc {
        Some(j) => describe_jemalloc(&mut out, figures, j, inuse),
        None => describe_other_allocator(&mut out, figures, inuse),
    }
    out
}

/// The figures themselves, one `name: value B` line each.
fn write_raw_figures(out: &mut String, figures: &AllocatorFigures) {
    if let Some(j) = &figures.jemalloc {
        for ((_, name), value) in JEMALLOC_FIGURES.iter().zip(j.values()) {
            let _ = writeln!(out, "{name}: {value} B");
        }
    }
    let _ = writeln!(out, "profiler: {} B", figures.profiler);
    if let Some(anon) = figures.rss_anon {
        let _ = writeln!(out, "rss_anon: {anon} B");
    }
    if let Some(file) = figures.rss_file {
        let _ = writeln!(out, "rss_file: {file} B");
    }
}

/// The reading when the program's allocator is not jemalloc: only the profile's estimate and the
/// profiler's own bytes are known.
fn describe_other_allocator(
    out: &mut String,
    figures: &AllocatorFigures,
    inuse: Option<&Estimate>,
) {
    let _ = writeln!(
        out,
        "The program's allocator is not jemalloc: its figures are unknown (the profiler's \
         jemalloc holds only the profiler's sampled objects)."
    );
    if let Some(inuse) = inuse {
        let (lo, hi) = inuse.bytes_interval_95();
        let _ = writeln!(
            out,
            "The profile's in-use estimate is {} (95% interval {} to {}).",
            mib(inuse.bytes),
            mib(lo),
            mib(hi)
        );
    }
    let _ = write!(out, "The profiler holds {}", mib(figures.profiler as f64));
    if let Some(anon) = figures.rss_anon {
        let _ = write!(
            out,
            ", {} of the anonymous RSS",
            share(figures.profiler, anon)
        );
    }
    out.push_str(".\n");
}

/// The reading of jemalloc's figures: coverage, fragmentation, resident beyond active, retained,
/// the profiler's share and the RSS outside jemalloc (see [`describe`]).
fn describe_jemalloc(
    out: &mut String,
    figures: &AllocatorFigures,
    j: &JemallocFigures,
    inuse: Option<&Estimate>,
) {
    let program = j.allocated.saturating_sub(figures.profiler);
    if let Some(inuse) = inuse {
        let (lo, hi) = inuse.bytes_interval_95();
        let _ = writeln!(
            out,
            "The profile covers {} (95% interval {} to {}) of the {} the program holds in \
             jemalloc ({}: allocated {} less the profiler's {}).",
            mib(inuse.bytes),
            mib(lo),
            mib(hi),
            mib(program as f64),
            ratio(inuse.bytes, program as f64),
            mib(j.allocated as f64),
            mib(figures.profiler as f64),
        );
    }
    let fragmentation = j.active.saturating_sub(j.allocated);
    let _ = writeln!(
        out,
        "Fragmentation: {} of the active pages is not allocated (active − allocated), {} of active.",
        mib(fragmentation as f64),
        share(fragmentation, j.active)
    );
    let _ = writeln!(
        out,
        "Resident beyond active: {} (dirty pages not yet returned to the system, and metadata \
         pages: the allocator's metadata is {}).",
        mib(j.resident.saturating_sub(j.active) as f64),
        mib(j.metadata as f64)
    );
    let _ = writeln!(
        out,
        "Retained but unused: {} of address space kept for reuse, not resident.",
        mib(j.retained as f64)
    );
    let _ = write!(
        out,
        "The profiler's share: {}, {} of allocated",
        mib(figures.profiler as f64),
        share(figures.profiler, j.allocated)
    );
    match figures.rss_anon {
        Some(anon) if anon >= j.resident => {
            let _ = writeln!(
                out,
                ". Of the anonymous RSS, {}, {} lies outside jemalloc's resident pages (thread \
                 stacks, other allocators, other mappings).",
                mib(anon as f64),
                mib((anon - j.resident) as f64)
            );
        }
        Some(anon) => {
            let _ = writeln!(
                out,
                ". The anonymous RSS, {}, is below jemalloc's resident figure, an upper bound \
                 that counts pages mapped but never touched.",
                mib(anon as f64)
            );
        }
        None => out.push_str(".\n"),
    }
}

/// Bytes in MiB, one decimal.
fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
}

/// `part` as a percentage of `whole`, one decimal (`n/a` of nothing).
fn share(part: u64, whole: u64) -> String {
    ratio(part as f64, whole as f64)
}

fn ratio(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}%", 100.0 * part / whole)
    } else {
        "n/a".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jemalloc() -> AllocatorFigures {
        AllocatorFigures {
            jemalloc: Some(JemallocFigures {
                allocated: 100 << 20,
                active: 110 << 20,
                resident: 120 << 20,
                mapped: 130 << 20,
                retained: 40 << 20,
                metadata: 3 << 20,
            }),
            profiler: 2 << 20,
            rss_anon: Some(125 << 20),
            rss_file: Some(5 << 20),
        }
    }

    #[test]
    fn figures_round_trip_through_annotations_in_the_printed_order() {
        for figures in [
            jemalloc(),
            AllocatorFigures {
                jemalloc: None,
                profiler: 7,
                rss_anon: None,
                rss_file: None,
            },
        ] {
            let annotations = figures.to_annotations();
            assert_eq!(
                AllocatorFigures::from_annotations(&annotations).unwrap(),
                figures
            );
        }
        let keys: Vec<String> = jemalloc()
            .to_annotations()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "allocator",
                "allocator_allocated",
                "allocator_active",
                "allocator_resident",
                "allocator_mapped",
                "allocator_retained",
                "allocator_metadata",
                "profiler_bytes",
                "process_rss_anon",
                "process_rss_file"
            ]
        );
    }

    #[test]
    fn a_missing_or_unreadable_figure_is_named() {
        let no_figures = [("shim_live_samples".to_string(), "3".to_string())];
        let e = AllocatorFigures::from_annotations(&no_figures).unwrap_err();
        assert!(e.to_string().contains("`allocator` is missing"), "{e}");
        let mut annotations = jemalloc().to_annotations();
        annotations.retain(|(k, _)| k != "allocator_mapped");
        let e = AllocatorFigures::from_annotations(&annotations).unwrap_err();
        assert!(
            e.to_string().contains("`allocator_mapped` is missing"),
            "{e}"
        );
        let mut annotations = jemalloc().to_annotations();
        annotations[1].1 = "12x".into();
        let e = AllocatorFigures::from_annotations(&annotations).unwrap_err();
        assert!(
            e.to_string().contains("`allocator_allocated` is `12x`"),
            "{e}"
        );
    }

    #[test]
    fn sums_add_each_figure_and_refuse_mixed_allocators() {
        let mut sum = jemalloc();
        sum.add(&jemalloc()).unwrap();
        assert_eq!(sum.jemalloc.unwrap().allocated, 200 << 20);
        assert_eq!(sum.jemalloc.unwrap().metadata, 6 << 20);
        assert_eq!(sum.profiler, 4 << 20);
        assert_eq!(sum.rss_file, Some(10 << 20));
        let mut partial = jemalloc();
        partial.rss_anon = None;
        sum.add(&partial).unwrap();
        assert_eq!(sum.rss_anon, None);
        let other = AllocatorFigures::default();
        assert!(sum.add(&other).is_err());
    }

    #[test]
    fn the_description_lists_the_figures_in_order_then_reads_them() {
        let inuse = Estimate {
            bytes: (96 << 20) as f64,
            bytes_variance: 1e12,
            ..Estimate::default()
        };
        let text = describe(&jemalloc(), Some(&inuse), 1);
        let lines: Vec<&str> = text.lines().collect();
        let values = jemalloc().jemalloc.unwrap().values();
        for (i, (_, name)) in JEMALLOC_FIGURES.iter().enumerate() {
            assert_eq!(lines[i], format!("{name}: {} B", values[i]));
        }
        assert_eq!(lines[6], format!("profiler: {} B", 2 << 20));
        assert_eq!(lines[7], format!("rss_anon: {} B", 125 << 20));
        assert_eq!(lines[8], format!("rss_file: {} B", 5 << 20));
        // 96 of the 98 MiB the program holds (100 allocated less the profiler's 2).
        assert!(lines[9].contains("covers 96.0 MiB"), "{}", lines[9]);
        assert!(lines[9].contains("of the 98.0 MiB"), "{}", lines[9]);
        assert!(lines[9].contains("98.0%"), "{}", lines[9]);
        assert!(
            lines[10].contains("10.0 MiB") && lines[10].contains("9.1%"),
            "{}",
            lines[10]
        );
        assert!(lines[11].contains("10.0 MiB"), "{}", lines[11]);
        assert!(lines[12].contains("40.0 MiB"), "{}", lines[12]);
        assert!(
            lines[13].contains("2.0%") && lines[13].contains("5.0 MiB"),
            "{}",
            lines[13]
        );
        assert_eq!(lines.len(), 14);
        let fleet = describe(&jemalloc(), None, 3);
        assert!(fleet.starts_with("figures summed over 3 dumps"), "{fleet}");
        assert!(!fleet.contains("covers"), "{fleet}");
        let mut untouched = jemalloc();
        untouched.rss_anon = Some(100 << 20);
        let text = describe(&untouched, None, 1);
        assert!(text.contains("below jemalloc's resident figure"), "{text}");
    }

    #[test]
    fn another_allocator_prints_the_profiler_and_rss_only() {
        let figures = AllocatorFigures {
            jemalloc: None,
            profiler: 1 << 20,
            rss_anon: Some(10 << 20),
            rss_file: None,
        };
        let text = describe(&figures, None, 1);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("profiler: {} B", 1 << 20));
        assert_eq!(lines[1], format!("rss_anon: {} B", 10 << 20));
        assert!(lines[2].contains("not jemalloc"), "{text}");
        assert!(lines[3].contains("10.0% of the anonymous RSS"), "{text}");
    }
}
