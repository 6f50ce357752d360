//! Where the resident memory is, per site, at a dump ([`jeprof_dumpfmt::rss`]): each live
//! sample's resident and swapped bytes from the page table, summed per stack as the in-use
//! figures are (each sample's bytes over its probability), and jemalloc's stranded slab bytes of
//! the program's arenas, charged to the stacks whose samples are of each size class.
//!
//! The live samples are visited in address order, so that samples sharing a window of the page
//! map cost one read between them (`parts::pagemap`); the sort and the per-stack sums are
//! allocated, inside the re-entrancy guard the dump holds (so they go to the inner allocator and
//! are never sampled), and freed when the dump's figures are made. No profiler lock is held while
//! the page map is read.
//!
//! jemalloc's figures are the merged statistics of every arena (`stats.arenas.4096.*`,
//! `MALLCTL_ARENAS_ALL`) less the sampled arena's own, as of the `epoch` refresh that
//! [`super::allocator::figures`] made at the start of the dump: the sampled arena's slabs (its
//! samples and the objects pinned to keep a slab per class) are the profiler's, not the program's.

use jeprof_dumpfmt::rss::{self, ByteEstimate, RssFigures, SiteRss, SlabClass, SlabFigures};
use jeprof_dumpfmt::{Estimate, Stack};

use crate::base::hash::Map;
use crate::base::settings;
use crate::parts::live_samples::LiveSample;
use crate::parts::pagemap::PageMap;
use crate::parts::sampled_arena;

/// jemalloc's `MALLCTL_ARENAS_ALL`: the index under which `stats.arenas.<i>.*` merges every arena.
const ARENAS_ALL: u32 = 4096;

/// The residency figures of the live samples `live` (address and record), per stack of `stacks`
/// (indexed by stack id); `None` when the `rss` setting is off.
pub(crate) fn figures(live: &[(usize, LiveSample)], stacks: &[Stack]) -> Option<RssFigures> {
    if !settings::rss() {
        return None;
    }
    let mut slabs = super::allocator::program_is_jemalloc()
        .then(slab_figures)
        .flatten();
    if let Some(slabs) = &mut slabs {
        for (_, sample) in live {
            if let Some(class) = slabs.class_of(sample.usable as u64) {
                slabs.classes[class].sampled_regions += 1;
            }
        }
    }
    // The addresses beside their indexes, so that the sort reads one array in order.
    let mut order: Vec<(usize, usize)> =
        live.iter().enumerate().map(|(i, (a, _))| (*a, i)).collect();
    order.sort_unstable();
    // Per stack id: resident, swapped, and whether a live sample is there.
    let mut per_stack =
        vec![(ByteEstimate::default(), ByteEstimate::default(), false); stacks.len()];
    let (page_size, pagemap) = match PageMap::open() {
        Ok(mut map) => {
            for &(addr, i) in &order {
                let sample = &live[i].1;
                let Some(slot) = per_stack.get_mut(sample.stack as usize) else {
                    continue;
                };
                let (resident, swapped) = map.residency(addr as u64, sample.usable as u64);
                slot.0.add(&ByteEstimate::of_sample(
                    sample.probability,
                    resident as f64,
                ));
                slot.1
                    .add(&ByteEstimate::of_sample(sample.probability, swapped as f64));
                slot.2 = true;
            }
            (map.page_size(), Ok(()))
        }
        Err(e) => {
            for (_, sample) in live {
                if let Some(slot) = per_stack.get_mut(sample.stack as usize) {
                    slot.2 = true;
                }
            }
            (4096, Err(e.to_string()))
        }
    };
    let stranded = slabs
        .as_ref()
        .map(|slabs| stranded_per_stack(slabs, live, stacks.len()));
    let sites = per_stack
        .into_iter()
        .enumerate()
        .filter(|(_, (_, _, has_live))| *has_live)
        .map(|(id, (resident, swapped, _))| SiteRss {
            frames: stacks[id].frames.clone(),
            resident,
            swapped,
            stranded: stranded.as_ref().map(|s| s[id]),
        })
        .collect();
    Some(RssFigures {
        page_size,
        pagemap: if pagemap.is_ok() { Ok(()) } else { pagemap },
        sites,
        slabs,
    })
}

/// Per stack id, the stranded slab bytes charged to it ([`rss::attribute_stranded`]): each
/// sample's class by its usable size (a small object's usable size is its class's size), its
/// in-use estimate added to its (stack, class).
fn stranded_per_stack(
    slabs: &SlabFigures,
    live: &[(usize, LiveSample)],
    stacks: usize,
) -> Vec<ByteEstimate> {
    let mut by_class: Map<(usize, usize), Estimate> = Map::default();
    for (_, sample) in live {
        if let Some(class) = slabs.class_of(sample.usable as u64) {
            by_class
                .entry((sample.stack as usize, class))
                .or_default()
                .add(&sample.estimate());
        }
    }
    let site_classes: Vec<(usize, usize, Estimate)> = by_class
        .into_iter()
        .map(|((stack, class), e)| (stack, class, e))
        .collect();
    rss::attribute_stranded(&slabs.classes, &site_classes, stacks)
}

/// jemalloc's small size classes and dirty and muzzy pages of the program's arenas (every arena
/// less the sampled one), as of the last `epoch` refresh; `None` if a figure cannot be read (a
/// jemalloc without statistics).
fn slab_figures() -> Option<SlabFigures> {
    let sampled = sampled_arena::arena_index();
    // Every arena's figure less the sampled arena's.
    let program = |stat: &str, bin: Option<u32>| -> Option<u64> {
        let of = |arena: u32| -> Option<u64> {
            match bin {
                Some(j) => read_usize(format_args!("stats.arenas.{arena}.bins.{j}.{stat}\0")),
                None => read_usize(format_args!("stats.arenas.{arena}.{stat}\0")),
            }
        };
        let all = of(ARENAS_ALL)?;
        let own = match sampled {
            Some(arena) => of(arena)?,
            None => 0,
        };
        Some(all.saturating_sub(own))
    };
    let nbins = read_u32(format_args!("arenas.nbins\0"))?;
    let mut classes = Vec::with_capacity(nbins as usize);
    for j in 0..nbins {
        classes.push(SlabClass {
            size: read_usize(format_args!("arenas.bin.{j}.size\0"))?,
            nregs: u64::from(read_u32(format_args!("arenas.bin.{j}.nregs\0"))?),
            slab_size: read_usize(format_args!("arenas.bin.{j}.slab_size\0"))?,
            curregs: program("curregs", Some(j))?,
            curslabs: program("curslabs", Some(j))?,
            nonfull_slabs: program("nonfull_slabs", Some(j))?,
            sampled_regions: 0,
        });
    }
    let page = read_usize(format_args!("arenas.page\0"))?;
    Some(SlabFigures {
        classes,
        dirty_bytes: program("pdirty", None)?.saturating_mul(page),
        muzzy_bytes: program("pmuzzy", None)?.saturating_mul(page),
    })
}

/// The `size_t` mallctl named `name` (NUL-terminated, formatted into a stack buffer).
fn read_usize(name: std::fmt::Arguments<'_>) -> Option<u64> {
    let mut buffer = [0u8; 96];
    let name = format_name(&mut buffer, name)?;
    // SAFETY: the name is NUL-terminated and every caller names a `size_t` statistic or setting.
    let value: usize = unsafe { tikv_jemalloc_ctl::raw::read(name) }.ok()?;
    Some(value as u64)
}

/// The `unsigned` (`uint32_t`) mallctl named `name`.
fn read_u32(name: std::fmt::Arguments<'_>) -> Option<u32> {
    let mut buffer = [0u8; 96];
    let name = format_name(&mut buffer, name)?;
    // SAFETY: the name is NUL-terminated and every caller names an `unsigned` or `uint32_t`
    // setting (`arenas.nbins`, `arenas.bin.<j>.nregs`).
    unsafe { tikv_jemalloc_ctl::raw::read(name) }.ok()
}

/// `name` written into `buffer`; `None` if it does not fit.
fn format_name<'a>(buffer: &'a mut [u8; 96], name: std::fmt::Arguments<'_>) -> Option<&'a [u8]> {
    let capacity = buffer.len();
    let mut out = &mut buffer[..];
    std::io::Write::write_fmt(&mut out, name).ok()?;
    let len = capacity - out.len();
    Some(&buffer[..len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemallocs_small_classes_are_read_in_increasing_size() {
        let _ = tikv_jemalloc_ctl::epoch::advance();
        let slabs = slab_figures().expect("jemalloc's statistics");
        assert!(slabs.classes.len() >= 30, "{}", slabs.classes.len());
        assert_eq!(slabs.classes[0].size, 8);
        assert!(slabs.classes.windows(2).all(|w| w[0].size < w[1].size));
        for c in &slabs.classes {
            assert_eq!(c.slab_size % 4096, 0, "{c:?}");
            assert!(c.nregs * c.size <= c.slab_size, "{c:?}");
            assert!(c.curregs <= c.curslabs * c.nregs, "{c:?}");
        }
    }
}
