//! In-process symbolization at dump time, with its memory cost measured and released.
//!
//! `backtrace::resolve` parses the DWARF of every object it looks into and caches it; in other
//! profilers such caches hold 100–400 MB and then dominate the very profile they help print. Here:
//! it runs inside the re-entrancy guard (so none of it is sampled), its peak is measured with
//! jemalloc's per-thread counters (`thread.allocatedp` / `thread.deallocatedp`, read between
//! lookups), and `backtrace::clear_symbol_cache()` drops the caches right after.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use jeprof_dumpfmt::{SourceLine, SymbolTable};

use crate::base::sync::lock;

/// What in-process symbolization cost, measured with jemalloc's per-thread counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SymbolizerCost {
    /// Addresses looked up.
    pub addresses: usize,
    /// Highest net bytes allocated by the dumping thread during symbolization (debug-info caches
    /// and names), sampled between lookups.
    pub peak_bytes: u64,
    /// Net bytes still allocated after `backtrace::clear_symbol_cache()` (the names themselves).
    pub retained_bytes: u64,
}

/// Serialises symbolization (backtrace's caches are process-wide) and is held across `fork`, so a
/// child never inherits the backtrace crate's lock held by another thread.
pub(crate) static SYMBOLIZE_LOCK: Mutex<()> = Mutex::new(());

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
    let counters = ThreadCounters::new();
    let base = counters.as_ref().map_or(0, ThreadCounters::net);
    let mut peak = 0i64;
    let mut names = BTreeMap::new();
    let mut lines = BTreeMap::new();
    for &key in keys {
        let mut list = Vec::new();
        let mut positions = Vec::new();
        // backtrace::resolve subtracts one from the address it is given (it expects return
        // addresses); our keys already point into the call, so add it back.
        backtrace::resolve(key.wrapping_add(1) as usize as *mut c_void, |symbol| {
            if let Some(name) = symbol.name() {
                list.push(format!("{name:#}"));
                // The position goes with its name (innermost first, as the names): reports by
                // line and `--list` read it back from the dump (`docs/design.md` §6).
                positions.push(match (symbol.filename(), symbol.lineno()) {
                    (Some(file), Some(line)) => Some(SourceLine {
                        file: file.display().to_string(),
                        line,
                    }),
                    _ => None,
                });
            }
        });
        if !list.is_empty() {
            if positions.iter().any(Option::is_some) {
                lines.insert(key, positions);
            }
            names.insert(key, list);
        }
        if let Some(c) = &counters {
            peak = peak.max(c.net() - base);
        }
    }
    backtrace::clear_symbol_cache();
    let retained = counters.as_ref().map_or(0, |c| c.net() - base);
    let binary = std::fs::read_link("/proc/self/exe")
        .ok()
        .map(|p| p.display().to_string());
    let cost = SymbolizerCost {
        addresses: keys.len(),
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
