//! Exact per-scope figures: the allocator wrapper and one label's figures.

/// A [`GlobalAlloc`](std::alloc::GlobalAlloc) that charges every block to the scope current when it was allocated, exactly
/// ([`crate::exact_scopes`]), and serves it from `A` (a [`crate::Profiled`] or any allocator).
/// Decide it before the first allocation (it is a `#[global_allocator]` type): every block's
/// layout changes.
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: jeprof_shim::ExactScopes<jeprof_shim::Profiled<std::alloc::System>> =
///     jeprof_shim::ExactScopes::new(jeprof_shim::Profiled::new(std::alloc::System));
/// ```
#[derive(Debug)]
pub struct ExactScopes<A> {
    pub(crate) inner: A,
}

impl<A> ExactScopes<A> {
    /// Wraps `inner`. `const`, so it can initialise a `#[global_allocator]` static.
    pub const fn new(inner: A) -> ExactScopes<A> {
        ExactScopes { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

/// One label's exact figures ([`crate::exact_scopes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExactScopeStats {
    /// The label.
    pub label: &'static str,
    /// Bytes (as requested) of the blocks allocated in the scope and not yet freed, wherever they
    /// went.
    pub live_bytes: i64,
    /// Those blocks.
    pub live_objects: i64,
    /// Bytes requested in the scope since start (a `realloc`'s growth included).
    pub allocated_bytes: u64,
}
