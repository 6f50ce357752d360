//! Where the resident memory goes, per site: the resident and swapped bytes of each stack's live
//! objects, the slab space its size classes strand, and the reconciliation of the process's RSS
//! with these parts.
//!
//! jeprof-shim reads, at a dump, the page table entries (`/proc/self/pagemap`: the present and
//! swapped bits need no privilege) of every live sampled object and writes per stack what they
//! stand for, with jemalloc's per-bin statistics, as annotations (`# <key>: <value>`, which jeprof
//! skips):
//!
//! | annotation | what it is |
//! |---|---|
//! | `rss_page_size` | the page size the residency was read at, bytes |
//! | `rss_pagemap` | `read`, or `unreadable: <why>` (then no `rss_site` line follows) |
//! | `rss_site` | per stack: `<resident> <variance> <swapped> <variance> <stranded> <variance> @ <frames>`, bytes (reals); `-` for both stranded figures without jemalloc; the frames as the stack's `@` line writes them |
//! | `rss_slab_class` | per small size class of the program's arenas: `<size> <nregs> <slab_size> <curregs> <curslabs> <nonfull_slabs> <sampled_regions>` (jemalloc's `arenas.bin.<j>.*` and `stats.arenas.<i>.bins.<j>.*`, the sampled arena's own bins subtracted; the live samples of the class, which are the program's objects held in the sampled arena) |
//! | `rss_dirty_bytes`, `rss_muzzy_bytes` | jemalloc's dirty and muzzy pages of the program's arenas (`stats.arenas.<i>.pdirty`, `pmuzzy` × page size) |
//!
//! The last three appear only when the program's allocator is jemalloc (`allocator: jemalloc`).
//!
//! # The estimates
//! An object's *resident bytes* are the bytes of it that lie on present pages, its *swapped
//! bytes* those on swapped pages: `Σ_pages |page ∩ object|·present(page)`. A live sample of
//! resident bytes `r` sampled with probability `p` stands for `r/p` resident bytes, with variance
//! estimate `r²(1 − p)/p²` ([`crate::math::SampleWeight::of_probability`] with `r` for the usable
//! size): the in-use unbiasing, with the object's resident bytes in place of its size. The sum over
//! a stack's samples is unbiased for the resident bytes of the stack's live objects whenever
//! whether an object is resident does not depend on whether it was sampled: sampling picks bytes
//! by a countdown that knows nothing of pages.
//!
//! Sampled objects live in the profiler's own arena, not beside the program's other objects. An
//! object of a page or more has pages of its own there (but for its first and last page), so its
//! figure is its own: what the program touched of it, and what the kernel swapped. A smaller object
//! shares its page with other samples, of other sites: the page is present when any of them was
//! touched, so an object the program never touched reads as resident when a neighbour was, and a
//! cold object on a page kept warm by a neighbour never reads as swapped. The rule charges the
//! page's state to each object by the bytes it overlaps; its bias is upward for the resident bytes
//! (downward for swapped) of small objects left untouched or cold. The program's own small objects
//! share pages with others in jemalloc's slabs just the same, so the figure still reads as "the
//! pages where this site's small objects lie are resident", which is what RSS counts.
//!
//! # Stranded slab space, per site
//! A size class's stranded bytes are its slabs' regions that hold no live object:
//! `(curslabs·nregs − curregs)·size` (regions in thread caches count as live, as jemalloc counts
//! them). They are charged to the sites whose sampled objects are of that class, by each site's
//! estimated share of the class's live bytes, which jemalloc counts exactly ([`attribute_stranded`];
//! `docs/design.md` §21 says why this rule). The share of sites with no live sample in the class
//! stays unattributed (in the totals).

use std::fmt::Write as _;

use crate::allocator::AllocatorFigures;
use crate::error::Error;
use crate::math::{confidence_interval_95, SampleWeight};
use crate::model::Estimate;

/// The annotation of [`RssFigures::page_size`].
pub const PAGE_SIZE: &str = "rss_page_size";
/// The annotation of [`RssFigures::pagemap`].
pub const PAGEMAP: &str = "rss_pagemap";
/// The annotation of one [`SiteRss`].
pub const SITE: &str = "rss_site";
/// The annotation of one [`SlabClass`].
pub const SLAB_CLASS: &str = "rss_slab_class";
/// The annotation of [`SlabFigures::dirty_bytes`].
pub const DIRTY_BYTES: &str = "rss_dirty_bytes";
/// The annotation of [`SlabFigures::muzzy_bytes`].
pub const MUZZY_BYTES: &str = "rss_muzzy_bytes";
/// [`PAGEMAP`]'s value when the page table entries were read.
pub const PAGEMAP_READ: &str = "read";

/// An unbiased estimate of a number of bytes, with its variance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ByteEstimate {
    /// The estimate.
    pub bytes: f64,
    /// Its variance.
    pub variance: f64,
}

impl ByteEstimate {
    /// What one sample of `bytes` (its resident, or swapped, bytes) sampled with probability `p`
    /// stands for: `bytes/p`, variance `bytes²(1 − p)/p²` (see the module's doc).
    pub fn of_sample(p: f64, bytes: f64) -> ByteEstimate {
        let w = SampleWeight::of_probability(p, bytes);
        ByteEstimate {
            bytes: w.bytes,
            variance: w.bytes_variance,
        }
    }

    /// Adds an independent estimate.
    pub fn add(&mut self, other: &ByteEstimate) {
        self.bytes += other.bytes;
        self.variance += other.variance;
    }

    /// The 95% confidence interval.
    pub fn interval_95(&self) -> (f64, f64) {
        confidence_interval_95(self.bytes, self.variance)
    }
}

/// One stack's residency.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteRss {
    /// The stack's frames, as [`crate::Stack::frames`].
    pub frames: Vec<u64>,
    /// Resident bytes of its live objects.
    pub resident: ByteEstimate,
    /// Swapped bytes of its live objects.
    pub swapped: ByteEstimate,
    /// The stranded slab bytes charged to it; `None` when the allocator is not jemalloc.
    pub stranded: Option<ByteEstimate>,
}

/// One small size class of the program's arenas, as jemalloc counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlabClass {
    /// The region size (`arenas.bin.<j>.size`).
    pub size: u64,
    /// Regions per slab (`arenas.bin.<j>.nregs`).
    pub nregs: u64,
    /// Bytes per slab (`arenas.bin.<j>.slab_size`).
    pub slab_size: u64,
    /// Regions in use (`stats.arenas.<i>.bins.<j>.curregs`).
    pub curregs: u64,
    /// Slabs (`curslabs`).
    pub curslabs: u64,
    /// Slabs with a free region (`nonfull_slabs`).
    pub nonfull_slabs: u64,
    /// Live samples of the class: the program's objects of this class held in the sampled arena
    /// (not in `curregs`, which is of the program's arenas).
    pub sampled_regions: u64,
}

impl SlabClass {
    /// Bytes of the class's slabs holding no live region: `(curslabs·nregs − curregs)·size`.
    pub fn stranded_bytes(&self) -> u64 {
        self.curslabs
            .saturating_mul(self.nregs)
            .saturating_sub(self.curregs)
            .saturating_mul(self.size)
    }

    /// The program's live bytes of the class: `(curregs + sampled_regions)·size`.
    pub fn live_bytes(&self) -> u64 {
        self.curregs
            .saturating_add(self.sampled_regions)
            .saturating_mul(self.size)
    }
}

/// jemalloc's slab and page figures of the program's arenas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlabFigures {
    /// The small size classes, in jemalloc's order (increasing size).
    pub classes: Vec<SlabClass>,
    /// Dirty pages: freed, not yet purged, resident.
    pub dirty_bytes: u64,
    /// Muzzy pages: purged lazily (`MADV_FREE`), resident until the kernel needs them.
    pub muzzy_bytes: u64,
}

impl SlabFigures {
    /// Stranded bytes over all classes.
    pub fn stranded_bytes(&self) -> u64 {
        self.classes.iter().map(SlabClass::stranded_bytes).sum()
    }

    /// The index of the class whose region size is `usable` exactly (a small object's usable
    /// size is its class's size); `None` for a large object.
    pub fn class_of(&self, usable: u64) -> Option<usize> {
        self.classes.binary_search_by_key(&usable, |c| c.size).ok()
    }
}

/// What a dump says of where its resident memory is.
#[derive(Debug, Clone, PartialEq)]
pub struct RssFigures {
    /// The page size, bytes.
    pub page_size: u64,
    /// `Ok` when the page table entries were read, else why not.
    pub pagemap: Result<(), String>,
    /// Per stack, in the dump's order.
    pub sites: Vec<SiteRss>,
    /// jemalloc's figures; `None` when the allocator is not jemalloc.
    pub slabs: Option<SlabFigures>,
}

impl RssFigures {
    /// The figures as annotations (see the module's table).
    pub fn to_annotations(&self) -> Vec<(String, String)> {
        let mut out = vec![(PAGE_SIZE.to_string(), self.page_size.to_string())];
        out.push((
            PAGEMAP.to_string(),
            match &self.pagemap {
                Ok(()) => PAGEMAP_READ.to_string(),
                Err(why) => format!("unreadable: {why}"),
            },
        ));
        for site in &self.sites {
            let stranded = match site.stranded {
                Some(s) => format!("{:e} {:e}", s.bytes, s.variance),
                None => "- -".to_string(),
            };
            let mut value = format!(
                "{:e} {:e} {:e} {:e} {stranded} @",
                site.resident.bytes,
                site.resident.variance,
                site.swapped.bytes,
                site.swapped.variance
            );
            for frame in &site.frames {
                let _ = write!(value, " {frame:#x}");
            }
            out.push((SITE.to_string(), value));
        }
        if let Some(slabs) = &self.slabs {
            for c in &slabs.classes {
                out.push((
                    SLAB_CLASS.to_string(),
                    format!(
                        "{} {} {} {} {} {} {}",
                        c.size,
                        c.nregs,
                        c.slab_size,
                        c.curregs,
                        c.curslabs,
                        c.nonfull_slabs,
                        c.sampled_regions
                    ),
                ));
            }
            out.push((DIRTY_BYTES.to_string(), slabs.dirty_bytes.to_string()));
            out.push((MUZZY_BYTES.to_string(), slabs.muzzy_bytes.to_string()));
        }
        out
    }

    /// The figures `annotations` carry; `Ok(None)` when they carry none (a dump of jemalloc, of
    /// an older shim, or of a shim with `rss:false`). An [`Error::Annotation`] names the first
    /// malformed one.
    pub fn from_annotations(annotations: &[(String, String)]) -> Result<Option<RssFigures>, Error> {
        let find = |key: &str| {
            annotations
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.trim())
        };
        let Some(page_size) = find(PAGE_SIZE) else {
            return Ok(None);
        };
        let page_size = page_size
            .parse::<u64>()
            .map_err(|_| Error::annotation(PAGE_SIZE, format!("is `{page_size}`, not a size")))?;
        let pagemap = match find(PAGEMAP) {
            Some(PAGEMAP_READ) => Ok(()),
            Some(other) => Err(other
                .strip_prefix("unreadable:")
                .unwrap_or(other)
                .trim()
                .to_string()),
            None => {
                return Err(Error::annotation(
                    PAGEMAP,
                    "is missing beside rss_page_size",
                ))
            }
        };
        let mut sites = Vec::new();
        let mut classes = Vec::new();
        for (key, value) in annotations {
            if key == SITE {
                sites.push(parse_site(value).ok_or_else(|| {
                    Error::annotation(
                        SITE,
                        format!(
                            "is `{value}`, not `<resident> <var> <swapped> <var> <stranded> \
                             <var> @ <frames>`"
                        ),
                    )
                })?);
            } else if key == SLAB_CLASS {
                classes.push(parse_class(value).ok_or_else(|| {
                    Error::annotation(SLAB_CLASS, format!("is `{value}`, not seven counts"))
                })?);
            }
        }
        let count = |key: &'static str| -> Result<Option<u64>, Error> {
            find(key)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| Error::annotation(key, format!("is `{v}`, not bytes")))
                })
                .transpose()
        };
        let slabs = match (count(DIRTY_BYTES)?, count(MUZZY_BYTES)?) {
            (Some(dirty_bytes), Some(muzzy_bytes)) => Some(SlabFigures {
                classes,
                dirty_bytes,
                muzzy_bytes,
            }),
            _ => None,
        };
        Ok(Some(RssFigures {
            page_size,
            pagemap,
            sites,
            slabs,
        }))
    }
}

/// An `rss_site` value; `None` if malformed.
fn parse_site(value: &str) -> Option<SiteRss> {
    let (figures, frames) = value.split_once('@')?;
    let fields: Vec<&str> = figures.split_whitespace().collect();
    let [resident, resident_var, swapped, swapped_var, stranded, stranded_var] = fields[..] else {
        return None;
    };
    let real = |s: &str| -> Option<f64> {
        let v: f64 = s.parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    let estimate = |b: &str, v: &str| -> Option<ByteEstimate> {
        Some(ByteEstimate {
            bytes: real(b)?,
            variance: real(v)?,
        })
    };
    let stranded = match (stranded, stranded_var) {
        ("-", "-") => None,
        (b, v) => Some(estimate(b, v)?),
    };
    let frames = frames
        .split_whitespace()
        .map(|f| u64::from_str_radix(f.strip_prefix("0x")?, 16).ok())
        .collect::<Option<Vec<u64>>>()?;
    Some(SiteRss {
        frames,
        resident: estimate(resident, resident_var)?,
        swapped: estimate(swapped, swapped_var)?,
        stranded,
    })
}

/// An `rss_slab_class` value; `None` if malformed.
fn parse_class(value: &str) -> Option<SlabClass> {
    let v = value
        .split_whitespace()
        .map(|f| f.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    let [size, nregs, slab_size, curregs, curslabs, nonfull_slabs, sampled_regions] = v[..] else {
        return None;
    };
    Some(SlabClass {
        size,
        nregs,
        slab_size,
        curregs,
        curslabs,
        nonfull_slabs,
        sampled_regions,
    })
}

/// The resident and swapped bytes of the object `[start, start + len)`, from the page table
/// entries `entries` of the pages from `first_page` on (`/proc/self/pagemap`'s 64-bit words: bit
/// 63 present, bit 62 swapped), pages of `page_size` bytes; a page past `entries` counts as
/// neither. Each page counts the bytes of the object it holds.
pub fn object_residency(
    start: u64,
    len: u64,
    page_size: u64,
    first_page: u64,
    entries: &[u64],
) -> (u64, u64) {
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    let end = start.saturating_add(len);
    let (mut resident, mut swapped) = (0u64, 0u64);
    let mut page = start / page_size;
    while page * page_size < end {
        let page_start = page * page_size;
        let overlap = end.min(page_start + page_size) - start.max(page_start);
        let entry = page
            .checked_sub(first_page)
            .and_then(|i| entries.get(i as usize))
            .copied()
            .unwrap_or(0);
        if entry & PRESENT != 0 {
            resident += overlap;
        } else if entry & SWAPPED != 0 {
            swapped += overlap;
        }
        page += 1;
    }
    (resident, swapped)
}

/// Stranded slab bytes per site: class `j`'s stranded bytes `S_j` charged to each site with
/// sampled objects of that class by its share of the class's live bytes, `S_j·A/D_j`, `A` the
/// site's estimated live bytes of the class and `D_j` the class's live bytes as jemalloc counts
/// them ([`SlabClass::live_bytes`]). `site_classes` holds, per (site, class index), the in-use
/// estimate of the site's live samples of that class; returns per site (`0..sites`) the bytes
/// charged.
///
/// `D_j` is a count, not an estimate, so the charge is unbiased for the site's true share
/// (`E(A) = ` its live bytes) and its variance is `S_j²·var(A)/D_j²`. The charges of a class add
/// up to `S_j` only in expectation and only over all of the class's users: the share of users with
/// no sample (small sites, the profiler's own tables) stays unattributed.
pub fn attribute_stranded(
    classes: &[SlabClass],
    site_classes: &[(usize, usize, Estimate)],
    sites: usize,
) -> Vec<ByteEstimate> {
    let mut out = vec![ByteEstimate::default(); sites];
    for &(site, class, a) in site_classes {
        let (Some(c), Some(slot)) = (classes.get(class), out.get_mut(site)) else {
            continue;
        };
        let live = c.live_bytes() as f64;
        if live <= 0.0 {
            continue;
        }
        let stranded = c.stranded_bytes() as f64;
        slot.add(&ByteEstimate {
            bytes: stranded * a.bytes / live,
            variance: stranded * stranded * a.bytes_variance / (live * live),
        });
    }
    out
}

/// The reconciliation of the anonymous RSS with its parts, in plain lines: the estimated resident
/// bytes of the program's live objects (with its 95% interval), jemalloc's stranded slab bytes,
/// dirty and muzzy pages and metadata, the profiler's bytes, and the rest; then the in-use
/// estimate split into resident, swapped and neither (never touched, or reclaimed). Without
/// jemalloc, says that the stranded slab space and the allocator's pages are absent.
pub fn reconcile(rss: &RssFigures, figures: &AllocatorFigures, inuse: &Estimate) -> String {
    let mut out = String::new();
    let mut resident = ByteEstimate::default();
    let mut swapped = ByteEstimate::default();
    for site in &rss.sites {
        resident.add(&site.resident);
        swapped.add(&site.swapped);
    }
    if let Err(why) = &rss.pagemap {
        let _ = writeln!(
            out,
            "Residency unknown: /proc/self/pagemap was unreadable when the dump was taken ({why})."
        );
    }
    let Some(anon) = figures.rss_anon else {
        out.push_str("The dump carries no RSS figure (RssAnon): nothing to reconcile.\n");
        return out;
    };
    let (lo, hi) = resident.interval_95();
    let _ = writeln!(out, "Anonymous RSS {}:", mib(anon as f64));
    let _ = writeln!(
        out,
        "  {:>10}  resident bytes of the program's live objects (estimate; 95% interval {} to {})",
        mib(resident.bytes),
        mib(lo),
        mib(hi)
    );
    let mut parts = resident.bytes + figures.profiler as f64;
    match (&rss.slabs, &figures.jemalloc) {
        (Some(slabs), Some(j)) => {
            let stranded = slabs.stranded_bytes();
            let rows = [
                (
                    stranded,
                    "stranded in slabs (free regions of slabs that hold live ones)",
                ),
                (
                    slabs.dirty_bytes,
                    "dirty pages (freed, not yet returned to the system)",
                ),
                (
                    slabs.muzzy_bytes,
                    "muzzy pages (returned with MADV_FREE; resident until the kernel takes them)",
                ),
                (j.metadata, "allocator metadata"),
            ];
            for (bytes, what) in rows {
                let _ = writeln!(out, "  {:>10}  {what}", mib(bytes as f64));
                parts += bytes as f64;
            }
        }
        _ => out.push_str(
            "  stranded slab space, dirty and muzzy pages: absent (the program's allocator is not \
             jemalloc; they are jemalloc's figures)\n",
        ),
    }
    let _ = writeln!(
        out,
        "  {:>10}  the profiler (its tables and sampled arena's overhead)",
        mib(figures.profiler as f64)
    );
    let _ = writeln!(
        out,
        "  {:>10}  the rest: thread stacks, other mappings and allocators, large objects' page \
         tails, and the estimate's error",
        signed_mib(anon as f64 - parts)
    );
    let neither = (inuse.bytes - resident.bytes - swapped.bytes).max(0.0);
    let _ = writeln!(
        out,
        "Of the in-use estimate {}: {} resident, {} swapped, {} neither (never touched, or \
         reclaimed).",
        mib(inuse.bytes),
        mib(resident.bytes),
        mib(swapped.bytes),
        mib(neither)
    );
    out
}

/// Bytes in MiB, one decimal.
fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
}

/// Bytes in MiB with a sign.
fn signed_mib(bytes: f64) -> String {
    format!("{:+.1} MiB", bytes / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;

    fn figures() -> RssFigures {
        RssFigures {
            page_size: 4096,
            pagemap: Ok(()),
            sites: vec![
                SiteRss {
                    frames: vec![0x401000, 0x402abc],
                    resident: ByteEstimate {
                        bytes: 1.5e6,
                        variance: 2.5e9,
                    },
                    swapped: ByteEstimate::default(),
                    stranded: Some(ByteEstimate {
                        bytes: 4096.0,
                        variance: 10.0,
                    }),
                },
                SiteRss {
                    frames: vec![0x7f00_0000_1234],
                    resident: ByteEstimate::default(),
                    swapped: ByteEstimate {
                        bytes: 8192.0,
                        variance: 0.0,
                    },
                    stranded: None,
                },
            ],
            slabs: Some(SlabFigures {
                classes: vec![
                    SlabClass {
                        size: 8,
                        nregs: 512,
                        slab_size: 4096,
                        curregs: 1000,
                        curslabs: 3,
                        nonfull_slabs: 1,
                        sampled_regions: 0,
                    },
                    SlabClass {
                        size: 48,
                        nregs: 256,
                        slab_size: 12288,
                        curregs: 10,
                        curslabs: 2,
                        nonfull_slabs: 2,
                        sampled_regions: 0,
                    },
                ],
                dirty_bytes: 1 << 20,
                muzzy_bytes: 0,
            }),
        }
    }

    #[test]
    fn figures_round_trip_through_annotations() {
        let f = figures();
        assert_eq!(
            RssFigures::from_annotations(&f.to_annotations()).unwrap(),
            Some(f)
        );
        let mut other = figures();
        other.slabs = None;
        other.pagemap = Err("permission denied".into());
        other.sites.truncate(1);
        other.sites[0].stranded = None;
        assert_eq!(
            RssFigures::from_annotations(&other.to_annotations()).unwrap(),
            Some(other)
        );
        assert_eq!(RssFigures::from_annotations(&[]).unwrap(), None);
    }

    #[test]
    fn a_malformed_site_or_class_is_named() {
        let mut a = figures().to_annotations();
        let site = a.iter_mut().find(|(k, _)| k == SITE).unwrap();
        site.1 = "1 2 3 @ 0x1".into();
        let e = RssFigures::from_annotations(&a).unwrap_err();
        assert!(e.to_string().contains("`rss_site` is `1 2 3 @ 0x1`"), "{e}");
        let mut a = figures().to_annotations();
        let class = a.iter_mut().find(|(k, _)| k == SLAB_CLASS).unwrap();
        class.1 = "8 512 4096 1 1 1".into();
        let e = RssFigures::from_annotations(&a).unwrap_err();
        assert!(e.to_string().contains("`rss_slab_class`"), "{e}");
    }

    #[test]
    fn stranded_bytes_are_the_slabs_regions_without_a_live_object() {
        let f = figures().slabs.unwrap();
        assert_eq!(f.classes[0].stranded_bytes(), (3 * 512 - 1000) * 8);
        assert_eq!(f.classes[1].stranded_bytes(), (2 * 256 - 10) * 48);
        assert_eq!(f.class_of(48), Some(1));
        assert_eq!(f.class_of(40), None);
    }

    #[test]
    fn each_page_counts_the_bytes_of_the_object_it_holds() {
        // An object from 100 bytes into page 10 to 50 bytes into page 13: pages 10 and 12
        // present, 11 swapped, 13 neither.
        let entries = [PRESENT | 7, SWAPPED, PRESENT, 0];
        let (start, len) = (10 * 4096 + 100, 3 * 4096 - 50);
        let (resident, swapped) = object_residency(start, len, 4096, 10, &entries);
        assert_eq!(resident, (4096 - 100) + 4096);
        assert_eq!(swapped, 4096);
        // A small object inside one present page is resident whole; past the entries, neither.
        assert_eq!(
            object_residency(12 * 4096 + 8, 16, 4096, 10, &entries),
            (16, 0)
        );
        assert_eq!(object_residency(20 * 4096, 16, 4096, 10, &entries), (0, 0));
    }

    #[test]
    fn a_samples_residency_is_unbiased_as_its_bytes_are() {
        let p = 0.25;
        let e = ByteEstimate::of_sample(p, 1000.0);
        assert_eq!(e.bytes, 4000.0);
        assert!((e.variance - 1000.0 * 1000.0 * 0.75 / 0.0625).abs() < 1e-6);
        assert_eq!(ByteEstimate::of_sample(p, 0.0), ByteEstimate::default());
    }

    #[test]
    fn stranded_bytes_are_charged_by_share_of_the_class_live_bytes_jemalloc_counts() {
        let mut classes = figures().slabs.unwrap().classes;
        // Class 0 holds 1000 regions in the program's arenas and 24 in the sampled arena.
        classes[0].sampled_regions = 24;
        let est = |bytes: f64, variance: f64| Estimate {
            bytes,
            bytes_variance: variance,
            ..Estimate::default()
        };
        // Class 0: site 0 holds three quarters of the 1024 regions' 8192 bytes, site 2 a
        // sixteenth; class 1: site 1 all of it.
        let site_classes = [
            (0, 0, est(6144.0, 100.0)),
            (2, 0, est(512.0, 100.0)),
            (1, 1, est(480.0, 0.0)),
        ];
        let out = attribute_stranded(&classes, &site_classes, 3);
        let s0 = classes[0].stranded_bytes() as f64;
        assert!((out[0].bytes - 0.75 * s0).abs() < 1e-9);
        assert!((out[2].bytes - s0 / 16.0).abs() < 1e-9);
        assert_eq!(out[1].bytes, classes[1].stranded_bytes() as f64);
        assert_eq!(out[1].variance, 0.0);
        assert!((out[0].variance - s0 * s0 * 100.0 / 8192.0f64.powi(2)).abs() < 1e-9);
        // A site in a class jemalloc counts empty is charged nothing.
        classes[1].curregs = 0;
        let out = attribute_stranded(&classes, &site_classes, 3);
        assert_eq!(out[1], ByteEstimate::default());
    }

    #[test]
    fn the_reconciliation_names_each_part_and_says_when_jemalloc_is_absent() {
        let allocator = AllocatorFigures {
            jemalloc: Some(crate::allocator::JemallocFigures {
                metadata: 2 << 20,
                ..Default::default()
            }),
            profiler: 1 << 20,
            rss_anon: Some(10 << 20),
            rss_file: None,
        };
        let inuse = Estimate {
            bytes: 2e6,
            ..Estimate::default()
        };
        let text = reconcile(&figures(), &allocator, &inuse);
        assert!(text.starts_with("Anonymous RSS 10.0 MiB:"), "{text}");
        assert!(text.contains("1.4 MiB  resident bytes"), "{text}");
        assert!(text.contains("stranded in slabs"), "{text}");
        assert!(text.contains("1.0 MiB  dirty pages"), "{text}");
        assert!(text.contains("2.0 MiB  allocator metadata"), "{text}");
        let mut other = figures();
        other.slabs = None;
        let allocator = AllocatorFigures {
            jemalloc: None,
            ..allocator
        };
        let text = reconcile(&other, &allocator, &inuse);
        assert!(
            text.contains("absent (the program's allocator is not jemalloc"),
            "{text}"
        );
    }
}
