//! In-process symbolization at dump time, in memory that does not grow with the debug info.
//!
//! Symbolizers built on whole-object caches (backtrace's, addr2line's `Context`) keep every
//! compilation unit they have looked into; in other profilers they hold 100–400 MB, at the very
//! moment a dump is taken to chase memory. Here each loaded object's file is mapped read-only
//! ([`objects`]: file-backed pages, which the kernel can drop, not the process's anonymous
//! memory); the addresses are sorted, and the DWARF is read one compilation unit at a time,
//! each unit dropped before the next ([`dwarf`]); the names of the ELF symbol table fill in
//! where the DWARF has none, in one pass over the table. What is allocated at once is one unit's
//! abbreviations and line-program header, the frames found, and any compressed sections
//! (at most [`objects::DECOMPRESSED_BUDGET`] per object; beyond it, symbol-table names only).
//! The names equal backtrace's for the same addresses: the same frames (innermost inlined
//! function first), the same demangling (`backtrace::SymbolName`), the same debug files
//! (`/usr/lib/debug/.build-id`, `.gnu_debuglink`).
//!
//! It runs inside the re-entrancy guard (so none of it is sampled), and its peak is measured
//! with jemalloc's per-thread counters (`thread.allocatedp` / `thread.deallocatedp`, read after
//! each unit that held addresses, while its data is alive).
//!
//! What *is* kept is the names found ([`NAMES`], at most [`MAX_CACHED_ADDRESSES`] addresses): a
//! profile served every few seconds names the same few thousand addresses each time, and reading
//! the debug info again for them would cost the same time per request. Only addresses not named
//! before are looked up; the names are dropped when a shared object was unloaded since (its
//! addresses may now hold other code).

mod dwarf;
mod objects;

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use jeprof_dumpfmt::{SourceLine, SymbolTable};

use crate::base::sync::lock;

pub(crate) use crate::api::symbolize::SymbolizerCost;

/// Serialises symbolization (one lookup at a time keeps the memory bound one unit's, and the
/// name cache consistent) and is held across `fork`, so a child never inherits [`NAMES`] or a
/// lookup half done by another thread.
pub(crate) static SYMBOLIZE_LOCK: Mutex<()> = Mutex::new(());

/// The most addresses whose names are kept between symbolizations (a few MiB of names); beyond it
/// the kept names are dropped and the cache starts over.
pub(crate) const MAX_CACHED_ADDRESSES: usize = 1 << 15;

/// Names found by earlier symbolizations (an empty list: the address has no name), and the
/// loader's count of unloaded objects when they were found. Only locked while [`SYMBOLIZE_LOCK`]
/// is held, so the fork handlers, which hold that, never leave it locked in a child.
struct NameCache {
    /// Names and source positions per address (both empty: nothing found).
    names: BTreeMap<u64, (Vec<String>, Vec<Option<SourceLine>>)>,
    unloads: u64,
}

static NAMES: Mutex<NameCache> = Mutex::new(NameCache {
    names: BTreeMap::new(),
    unloads: 0,
});

/// How many shared objects the loader has unloaded so far (`dlpi_subs`, the same in every
/// object's `dl_phdr_info`).
fn unloads() -> u64 {
    /// The callback: reads the counter from the first object and stops.
    ///
    /// # Safety
    /// `info` is the `dl_phdr_info` dl_iterate_phdr passes, `data` the `&mut u64` [`unloads`]
    /// passed.
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: see the contract.
        unsafe { *data.cast::<u64>() = (*info).dlpi_subs };
        1
    }
    let mut subs = 0u64;
    // SAFETY: `first` matches the callback's signature and writes only through `data`, which
    // points at `subs`, alive for the call.
    unsafe { crate::base::loader::iterate_phdr(first, (&mut subs as *mut u64).cast()) };
    subs
}

// The last symbolization's cost, as plain atomics (no lock, so nothing to hold across `fork`).
// Ordering: statistics, each read on its own; a reader racing a symbolization may mix two runs.
static LAST_ADDRESSES: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_PEAK: AtomicU64 = AtomicU64::new(0);
static LAST_RETAINED: AtomicU64 = AtomicU64::new(0);

/// The cost of the last symbolization, if any.
pub(crate) fn last_cost() -> Option<SymbolizerCost> {
    // Ordering: see the statics above.
    let addresses = LAST_ADDRESSES.load(Ordering::Relaxed);
    (addresses != u64::MAX).then(|| SymbolizerCost {
        addresses: addresses as usize,
        peak_bytes: LAST_PEAK.load(Ordering::Relaxed),
        // Ordering: statistics, read on their own.
        retained_bytes: LAST_RETAINED.load(Ordering::Relaxed),
    })
}

/// jemalloc's running totals of bytes allocated and freed by the calling thread
/// (`thread.allocatedp` / `thread.deallocatedp`, which need no `stats` build of jemalloc).
struct ThreadCounters {
    allocated: tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
    deallocated: tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
}

impl ThreadCounters {
    fn new() -> Option<ThreadCounters> {
        Some(ThreadCounters {
            allocated: tikv_jemalloc_ctl::thread::allocatedp::read().ok()?,
            deallocated: tikv_jemalloc_ctl::thread::deallocatedp::read().ok()?,
        })
    }

    /// Bytes allocated minus bytes freed by this thread, through jemalloc, so far.
    fn net(&self) -> i64 {
        self.allocated.get().wrapping_sub(self.deallocated.get()) as i64
    }
}

/// Names for `keys` (addresses as jeprof looks them up: inside the call instruction), innermost
/// inlined function first, with the source file and line of each where the debug info has them,
/// and what it cost. The caller holds the re-entrancy guard.
pub(crate) fn symbol_table(keys: &[u64]) -> (SymbolTable, SymbolizerCost) {
    let _serial = lock(&SYMBOLIZE_LOCK);
    let mut cache = lock(&NAMES);
    let unloaded = unloads();
    if cache.unloads != unloaded || cache.names.len() + keys.len() > MAX_CACHED_ADDRESSES {
        cache.names.clear();
        cache.unloads = unloaded;
    }
    let counters = ThreadCounters::new();
    let base = counters.as_ref().map_or(0, ThreadCounters::net);
    let mut peak = 0i64;
    let mut names = BTreeMap::new();
    let mut lines = BTreeMap::new();
    let mut missing = Vec::new();
    for &key in keys {
        match cache.names.get(&key) {
            Some((list, positions)) => {
                if !list.is_empty() {
                    names.insert(key, list.clone());
                }
                if positions.iter().any(Option::is_some) {
                    lines.insert(key, positions.clone());
                }
            }
            None => missing.push(key),
        }
    }
    missing.sort_unstable();
    missing.dedup();
    let looked_up = missing.len();
    let mut observe = || {
        if let Some(c) = &counters {
            peak = peak.max(c.net() - base);
        }
    };
    let found = lookup(&missing, &mut observe);
    observe();
    for (key, (list, positions)) in missing.into_iter().zip(found) {
        if keys.len() <= MAX_CACHED_ADDRESSES {
            cache.names.insert(key, (list.clone(), positions.clone()));
        }
        if !list.is_empty() {
            if positions.iter().any(Option::is_some) {
                lines.insert(key, positions);
            }
            names.insert(key, list);
        }
    }
    let retained = counters.as_ref().map_or(0, |c| c.net() - base);
    let binary = std::fs::read_link("/proc/self/exe")
        .ok()
        .map(|p| p.display().to_string());
    let cost = SymbolizerCost {
        addresses: looked_up,
        peak_bytes: peak.max(0) as u64,
        retained_bytes: retained.max(0) as u64,
    };
    // Ordering: see the statics above.
    LAST_PEAK.store(cost.peak_bytes, Ordering::Relaxed);
    LAST_RETAINED.store(cost.retained_bytes, Ordering::Relaxed);
    LAST_ADDRESSES.store(cost.addresses as u64, Ordering::Relaxed);
    (
        SymbolTable {
            binary,
            names,
            lines,
        },
        cost,
    )
}

/// The names of one address (innermost first) and the source position of each.
type Names = (Vec<String>, Vec<Option<SourceLine>>);

/// Names for each of `keys` (sorted, distinct), in the same order; empty where nothing names it.
/// `observe` is called while the most is allocated (after each unit, each decompression).
fn lookup(keys: &[u64], observe: &mut dyn FnMut()) -> Vec<Names> {
    let mut out = vec![(Vec::new(), Vec::new()); keys.len()];
    let libraries = objects::loaded();
    // (object, its address, position in `keys`): grouped by object, sorted by address.
    let mut placed: Vec<(usize, u64, usize)> = keys
        .iter()
        .enumerate()
        .filter_map(|(k, &key)| {
            libraries
                .iter()
                .enumerate()
                .find_map(|(l, library)| library.svma(key).map(|svma| (l, svma, k)))
        })
        .collect();
    placed.sort_unstable();
    for group in placed.chunk_by(|a, b| a.0 == b.0) {
        name_in_object(&libraries[group[0].0], group, &mut out, observe);
    }
    out
}

/// Names `group`'s addresses (one object's, sorted) into `out`: frames from the DWARF (of the
/// separate debug file if there is one), the symbol table's name where the DWARF gives a frame
/// without a name or no frame at all, as backtrace does.
fn name_in_object(
    library: &objects::Library,
    group: &[(usize, u64, usize)],
    out: &mut [Names],
    observe: &mut dyn FnMut(),
) {
    let Some(file) = objects::Mapping::open(&library.path) else {
        return;
    };
    let Some(elf) = objects::ElfFile::parse(file.bytes()) else {
        return;
    };
    let debug_file = elf
        .debug_file(&library.path)
        .and_then(|path| objects::Mapping::open(&path));
    let debug_elf = debug_file
        .as_ref()
        .and_then(|m| objects::ElfFile::parse(m.bytes()));
    let source = debug_elf.as_ref().unwrap_or(&elf);
    let mut probes: Vec<dwarf::Probe> = group
        .iter()
        .map(|&(_, svma, _)| dwarf::Probe { svma, frames: None })
        .collect();
    if source.has_dwarf() {
        if let Some(decompressed) = source.decompress() {
            observe();
            dwarf::find_frames(&source.dwarf(&decompressed), &mut probes, observe);
        }
    }
    let needs_symbol = |p: &dwarf::Probe| {
        p.frames
            .as_ref()
            .is_none_or(|frames| frames.iter().any(|f| f.name.is_none()))
    };
    let wanted: Vec<u64> = probes
        .iter()
        .filter(|p| needs_symbol(p))
        .map(|p| p.svma)
        .collect();
    // A stripped file's own functions are in its MiniDebugInfo, where it carries one; its
    // `.dynsym` names the rest.
    let mini = (!source.has_symtab())
        .then(|| elf.mini_debug_info())
        .flatten();
    let mini_elf = mini.as_deref().and_then(objects::ElfFile::parse);
    let mini_names = mini_elf.as_ref().map(|m| m.symbol_names(&wanted));
    let mut symbols = source
        .symbol_names(&wanted)
        .into_iter()
        .enumerate()
        .map(|(i, name)| mini_names.as_ref().and_then(|m| m[i]).or(name));
    for (probe, &(_, _, k)) in probes.into_iter().zip(group) {
        let symbol = if needs_symbol(&probe) {
            symbols
                .next()
                .flatten()
                .map(|raw| format!("{:#}", backtrace::SymbolName::new(raw)))
        } else {
            None
        };
        let (names, positions) = &mut out[k];
        match probe.frames {
            Some(frames) => {
                for frame in frames {
                    let Some(name) = frame.name.or_else(|| symbol.clone()) else {
                        continue;
                    };
                    names.push(name);
                    // The position goes with its name (innermost first, as the names): reports
                    // by line and `--list` read it back from the dump (`docs/design.md` §6).
                    positions.push(match (frame.file, frame.line) {
                        (Some(file), Some(line)) => Some(SourceLine { file, line }),
                        _ => None,
                    });
                }
            }
            None => {
                if let Some(name) = symbol {
                    names.push(name);
                    positions.push(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn named_function() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn names_found_once_are_served_again_without_a_lookup() {
        // An address inside `named_function`, as a dump's key for a caller frame would be.
        let key = named_function as fn() -> u64 as usize as u64 + 1;
        let (first, cost) = symbol_table(&[key]);
        let names = first.names.get(&key).expect("named");
        assert!(
            names.iter().any(|n| n.ends_with("named_function")),
            "{names:?}"
        );
        let (again, cost_again) = symbol_table(&[key]);
        assert_eq!(again.names, first.names);
        assert!(cost.addresses <= 1, "{cost:?}");
        assert_eq!(cost_again.addresses, 0, "looked up again: {cost_again:?}");
        assert_eq!(cost_again.peak_bytes, 0);
    }
}
