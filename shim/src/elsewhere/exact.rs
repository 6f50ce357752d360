//! Exact per-scope figures, off Linux: scopes are not tracked, so [`ExactScopes`] forwards every
//! call to the allocator it wraps and there are no figures.

use std::alloc::{GlobalAlloc, Layout};

use crate::api::exact::{ExactScopeStats, ExactScopes};

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

/// No label has figures here.
pub(crate) fn all() -> Vec<ExactScopeStats> {
    Vec::new()
}
