//! What in-process symbolization cost (`parts::symbolize` on Linux).

/// What in-process symbolization cost, measured with jemalloc's per-thread counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SymbolizerCost {
    /// Addresses looked up in the debug info (those named by an earlier symbolization are not).
    pub addresses: usize,
    /// Highest net bytes allocated by the dumping thread during symbolization (one unit's
    /// debug-info structures, decompressed sections and the names), sampled after each unit.
    pub peak_bytes: u64,
    /// Net bytes still allocated when it returns (the names themselves, and their cached copy).
    pub retained_bytes: u64,
}
