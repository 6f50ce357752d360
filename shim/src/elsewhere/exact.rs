//! Exact per-scope figures, off Linux: scopes are not tracked, so [`ExactScopes`] forwards every
//! call to the allocator it wraps and there are no figures.

use std::alloc::{GlobalAlloc, Layout};

/// A [`GlobalAlloc`] that charges blocks to scopes exactly (on Linux); here the allocator it wraps.
#[derive(Debug)]
pub struct ExactScopes<A> {
    inner: A,
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

// SAFETY: every call is the inner allocator's, with the caller's arguments unchanged.
unsafe impl<A: GlobalAlloc> GlobalAlloc for ExactScopes<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.inner.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded GlobalAlloc contract.
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }
}

/// One label's exact figures ([`crate::exact_scopes`]; none here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExactScopeStats {
    /// The label.
    pub label: &'static str,
    /// Bytes of the blocks allocated in the scope and not yet freed.
    pub live_bytes: i64,
    /// Those blocks.
    pub live_objects: i64,
    /// Bytes requested in the scope since start.
    pub allocated_bytes: u64,
}

/// No label has figures here.
pub(crate) fn all() -> Vec<ExactScopeStats> {
    Vec::new()
}
