//! The count of samples dropped on the sampled path, by reason.

/// How many samples were dropped, by reason. A dropped sample's allocation is served by the inner
/// allocator and not recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dropped {
    /// The sampled arena's reserved range was full (raise `arena_size`).
    pub arena_exhausted: u64,
    /// The sampled arena could not be created (address space reservation or `arenas.create`
    /// failed).
    pub arena_unavailable: u64,
    /// The sample had a new stack and the stack table was at `max_stacks`.
    pub stack_table_full: u64,
}

impl Dropped {
    /// All drops together.
    pub fn total(&self) -> u64 {
        self.arena_exhausted + self.arena_unavailable + self.stack_table_full
    }
}
