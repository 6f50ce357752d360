//! The allocator's figures at the moment of a dump ([`jeprof_dumpfmt::allocator`]): jemalloc's
//! `stats.*` when the program's heap is the profiler's jemalloc, the profiler's own bytes, and the
//! process's `RssAnon`/`RssFile`.
//!
//! Which allocator holds the program's heap is noted at the first slow path of the allocator
//! entry: [`note_inner`] for `Profiled<A>` (by `A`'s type name), [`note_jemalloc`] for the C entry
//! (libjeprof_preload.so serves every block from the shim's jemalloc). The shim always links
//! tikv-jemalloc-sys for its sampled arena, so its jemalloc exists whatever `A` is; only with
//! `A = tikv_jemallocator::Jemalloc` is it also the program's (tikv-jemalloc-sys declares
//! `links = "jemalloc"`, so a build holds one copy of it, which both crates use). With any other
//! `A` (the system allocator, mimalloc, a wrapper of the program's own) its statistics describe
//! the sampled arena and the profiler's tables, nothing of the program's heap, and are left out.
//!
//! Reading the figures costs one `epoch` refresh of jemalloc's statistics (it merges every
//! arena's counters), a handful of `mallctl` reads, a pass over the live samples (under each
//! shard's lock in turn) and one read of `/proc/self/status` into a stack buffer: nothing here
//! allocates.

use std::io::Read as _;
use std::sync::atomic::{AtomicU8, Ordering};

use jeprof_dumpfmt::allocator::{AllocatorFigures, JemallocFigures};

use crate::base::thread::Guard;
use crate::parts::{live_samples, sampled_arena};

/// Which allocator serves the program's unsampled blocks: [`UNKNOWN`] until the allocator entry's
/// first slow path, then [`JEMALLOC`] or [`OTHER`] for good.
static KIND: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const JEMALLOC: u8 = 1;
const OTHER: u8 = 2;

/// The type names under which `Profiled<A>`'s `A` is the shim's jemalloc: tikv-jemallocator's
/// allocator, alone or behind [`crate::ExactScopes`] (which adds a header to each block and
/// serves it from its own inner allocator).
fn is_jemalloc(type_name: &str) -> bool {
    const JEMALLOCATOR: &str = "tikv_jemallocator::Jemalloc";
    let exact = type_name
        .strip_prefix("jeprof_shim::exact::ExactScopes<")
        .and_then(|inner| inner.strip_suffix('>'));
    type_name == JEMALLOCATOR || exact == Some(JEMALLOCATOR)
}

/// Notes `A` as the allocator of the program's heap, once (a load of a word written once, on the
/// slow path only).
#[inline]
pub(crate) fn note_inner<A>() {
    // Ordering: the word carries no other data; a thread that reads UNKNOWN late only repeats
    // the same decision.
    if KIND.load(Ordering::Relaxed) == UNKNOWN {
        note_kind(is_jemalloc(std::any::type_name::<A>()));
    }
}

/// Notes the shim's jemalloc as the allocator of the program's heap (the C entry's).
#[inline]
pub(crate) fn note_jemalloc() {
    // Ordering: as in `note_inner`.
    if KIND.load(Ordering::Relaxed) == UNKNOWN {
        note_kind(true);
    }
}

#[cold]
#[inline(never)]
fn note_kind(jemalloc: bool) {
    let kind = if jemalloc { JEMALLOC } else { OTHER };
    // Ordering: as in `note_inner`; the first entry to decide wins (every entry of one process
    // decides the same).
    let _ = KIND.compare_exchange(UNKNOWN, kind, Ordering::Relaxed, Ordering::Relaxed);
}

/// Whether the program's heap is the profiler's jemalloc (as noted at the allocator entry's first
/// slow path; false before it).
pub(crate) fn program_is_jemalloc() -> bool {
    // Ordering: as in `note_inner`.
    KIND.load(Ordering::Relaxed) == JEMALLOC
}

/// The figures now. `tables_bytes` is the profiler's tables' size ([`crate::Stats::metadata_bytes`]).
///
/// `profiler` ([`AllocatorFigures::profiler`]) counts:
/// - the profiler's tables, as `tables_bytes` counts them (capacity: the live-sample store's
///   spilled maps, the stack table, the per-thread tables, the peak tracker, the windows' tables);
///   these live in the program's allocator (the profiler allocates them through `A`, outside
///   sampling);
/// - the sampled arena's overhead: what jemalloc counts as allocated in the sampled arena beyond
///   the live samples' usable bytes, that is, the objects pinned to keep one slab per small size
///   class (about 100 KiB; the smallest classes only, with pages of 64 KiB) and sampled objects freed into a thread's sampled cache and not yet
///   returned to the arena.
///
/// It does not count: the size-class rounding of the tables' blocks; what a dump, an endpoint or
/// the symbolizer allocates while it runs (transient, freed when it returns); the listener's
/// threads and buffers; thread caches and jemalloc's bookkeeping for the sampled arena (in
/// `allocator_metadata`); the sampled arena's partly used slabs and dirty pages (in `active` and
/// `resident`); its reserved address range (`PROT_NONE`, neither memory nor commit charge); and
/// the 64-byte thread-local state of each thread.
pub(crate) fn figures(tables_bytes: u64) -> AllocatorFigures {
    let _guard = Guard::enter();
    // The statistics first: everything below reads them as of this refresh.
    let refreshed = tikv_jemalloc_ctl::epoch::advance().is_ok();
    let jemalloc = if refreshed && KIND.load(Ordering::Relaxed) == JEMALLOC {
        jemalloc_figures()
    } else {
        None
    };
    let arena_overhead = if refreshed {
        sampled_arena_allocated().map_or(0, |allocated| allocated.saturating_sub(live_usable()))
    } else {
        0
    };
    let (rss_anon, rss_file) = process_rss();
    AllocatorFigures {
        jemalloc,
        profiler: tables_bytes.saturating_add(arena_overhead),
        rss_anon,
        rss_file,
    }
}

/// jemalloc's six figures, as of the last `epoch` refresh; `None` if one cannot be read (a
/// jemalloc built without statistics).
fn jemalloc_figures() -> Option<JemallocFigures> {
    use tikv_jemalloc_ctl::stats;
    let read = |r: tikv_jemalloc_ctl::Result<usize>| r.ok().map(|v| v as u64);
    Some(JemallocFigures {
        allocated: read(stats::allocated::read())?,
        active: read(stats::active::read())?,
        resident: read(stats::resident::read())?,
        mapped: read(stats::mapped::read())?,
        retained: read(stats::retained::read())?,
        metadata: read(stats::metadata::read())?,
    })
}

/// Bytes jemalloc counts as allocated in the sampled arena (its small and large blocks), as of
/// the last `epoch` refresh; `None` before the arena exists.
fn sampled_arena_allocated() -> Option<u64> {
    let arena = sampled_arena::arena_index()?;
    let mut total = 0u64;
    for class in ["small", "large"] {
        let mut name = [0u8; 64];
        let mut out = &mut name[..];
        std::io::Write::write_fmt(
            &mut out,
            format_args!("stats.arenas.{arena}.{class}.allocated\0"),
        )
        .ok()?;
        // SAFETY: the name is NUL-terminated and names a `size_t` statistic.
        let value: usize = unsafe { tikv_jemalloc_ctl::raw::read(&name) }.ok()?;
        total += value as u64;
    }
    Some(total)
}

/// The live samples' usable bytes: what the program holds in the sampled arena.
fn live_usable() -> u64 {
    live_samples::LIVE
        .iter()
        .map(|shard| shard.lock().samples().map(|s| s.usable as u64).sum::<u64>())
        .sum()
}

/// `RssAnon` and `RssFile` of `/proc/self/status`, in bytes (the file says kB, 1024 bytes).
fn process_rss() -> (Option<u64>, Option<u64>) {
    // The file is about 1.5 KiB; read it whole into a stack buffer (opening a short path
    // allocates nothing either).
    let mut buffer = [0u8; 8192];
    let Ok(mut file) = std::fs::File::open("/proc/self/status") else {
        return (None, None);
    };
    let mut len = 0;
    while len < buffer.len() {
        match file.read(&mut buffer[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return (None, None),
        }
    }
    let text = String::from_utf8_lossy(&buffer[..len]);
    (status_kib(&text, "RssAnon:"), status_kib(&text, "RssFile:"))
}

/// The `<key> <n> kB` line of `/proc/self/status`, in bytes.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tikv_jemallocator_alone_or_behind_exact_scopes_is_jemalloc() {
        assert!(is_jemalloc("tikv_jemallocator::Jemalloc"));
        assert!(is_jemalloc(
            "jeprof_shim::exact::ExactScopes<tikv_jemallocator::Jemalloc>"
        ));
        for other in [
            "std::alloc::System",
            "mimalloc::MiMalloc",
            "jemallocator::Jemalloc",
            "jeprof_shim::exact::ExactScopes<std::alloc::System>",
            "my_app::Counting<tikv_jemallocator::Jemalloc>",
        ] {
            assert!(!is_jemalloc(other), "{other}");
        }
    }

    #[test]
    fn status_lines_are_read_in_kib() {
        let status = "Name:\tx\nRssAnon:\t    1200 kB\nRssFile:\t      16 kB\n";
        assert_eq!(status_kib(status, "RssAnon:"), Some(1200 * 1024));
        assert_eq!(status_kib(status, "RssFile:"), Some(16 * 1024));
        assert_eq!(status_kib(status, "RssShmem:"), None);
        let (anon, file) = process_rss();
        assert!(anon.is_some_and(|a| a > 0) && file.is_some_and(|f| f > 0));
    }
}
