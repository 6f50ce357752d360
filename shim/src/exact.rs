//! Exact attribution, opt-in: [`ExactScopes`] puts a header before every block naming the scope
//! that allocated it, so a free, a `realloc` or a move between tasks always credits that scope.
//!
//! The header is `max(16, align)` bytes, so the block after it keeps its alignment (the header's
//! size is a multiple of every alignment up to it); its last two bytes hold the scope's id. The
//! id indexes a static table of counters, one cache line per label, so the counter is reached
//! from the block itself and there is nothing to reclaim when a scope ends: counters are per label
//! (at most 4,095, interned as for the sampled figures), not per scope instance, and a label's
//! counter returns to zero when its last block is freed however many times the label was entered
//! (`docs/design.md` §12). Blocks allocated in no scope, or by the profiler itself (its tables,
//! inside its re-entrancy guard), carry id 0 and touch no counter.
//!
//! What it costs: the header (16 bytes for most blocks, more padding only for alignments above
//! 16), a thread-local read on every allocation, and three atomic additions on every allocation
//! and two on every free of a scoped block, on a line shared by every thread allocating in that
//! scope. Measured against the sampled figures in `bench/RESULTS.md`.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::base::sync::CacheLine;
use crate::base::thread;
use crate::parts::scopes::{self, MAX_SCOPES};

pub(crate) use crate::api::exact::{ExactScopeStats, ExactScopes};

/// One label's exact figures.
struct Counter {
    /// Bytes (as requested) of its live blocks. Signed so that a bug shows as a negative figure
    /// instead of a huge one.
    live_bytes: AtomicI64,
    /// Its live blocks.
    live_objects: AtomicI64,
    /// Bytes requested since start.
    allocated_bytes: AtomicU64,
}

static COUNTERS: [CacheLine<Counter>; MAX_SCOPES] = [const {
    CacheLine(Counter {
        live_bytes: AtomicI64::new(0),
        live_objects: AtomicI64::new(0),
        allocated_bytes: AtomicU64::new(0),
    })
}; MAX_SCOPES];

/// Header bytes in front of a block of alignment `align`: a multiple of `align`, at least 16.
#[inline(always)]
fn header(align: usize) -> usize {
    align.max(16)
}

/// The inner allocator's layout for a user block of `size` bytes and alignment `align`: the
/// header then the block, aligned to the header's size. `None` if it would overflow.
#[inline(always)]
fn outer_layout(size: usize, align: usize) -> Option<Layout> {
    let h = header(align);
    let total = size.checked_add(h)?;
    // `Layout::from_size_align`'s own checks, less the power-of-two test (every alignment is one,
    // and so is 16): the total rounded up to `h` must not exceed `isize::MAX`.
    if total > isize::MAX as usize - (h - 1) {
        return None;
    }
    // SAFETY: `h` is a non-zero power of two and `total` rounded up to it fits in `isize` (above).
    Some(unsafe { Layout::from_size_align_unchecked(total, h) })
}

/// Charges `size` bytes to `scope` (a new block, or the growth of one).
#[inline(always)]
fn charge(scope: u16, size: usize, objects: i64) {
    if scope == 0 {
        return;
    }
    let c = &COUNTERS[scope as usize];
    // Ordering: independent statistics counters; readers take no decision on their combination,
    // and a block's free is ordered after its allocation by the program itself.
    c.live_bytes.fetch_add(size as i64, Ordering::Relaxed);
    if objects != 0 {
        // Ordering: as above.
        c.live_objects.fetch_add(objects, Ordering::Relaxed);
    }
    // Ordering: as above.
    c.allocated_bytes.fetch_add(size as u64, Ordering::Relaxed);
}

/// Credits `size` bytes back to `scope` (a freed block, or the shrinking of one).
#[inline(always)]
fn credit(scope: u16, size: usize, objects: i64) {
    if scope == 0 {
        return;
    }
    let c = &COUNTERS[scope as usize];
    // Ordering: see `charge`.
    c.live_bytes.fetch_sub(size as i64, Ordering::Relaxed);
    if objects != 0 {
        // Ordering: see `charge`.
        c.live_objects.fetch_sub(objects, Ordering::Relaxed);
    }
}

/// Where a user block's scope id lives: the two bytes just before it (inside its header).
///
/// # Safety
/// `user` is a block this allocator handed out (it follows a header of at least 16 bytes).
#[inline(always)]
unsafe fn id_slot(user: *mut u8) -> *mut u16 {
    // SAFETY: the header is at least 16 bytes, so user − 2 lies inside the same allocation; the
    // header's size is a multiple of 16 and the block is aligned to it, so user − 2 is 2-aligned.
    unsafe { user.sub(2).cast::<u16>() }
}

// SAFETY: every block handed out is the inner allocator's block for `outer_layout(size, align)`
// offset by `header(align)` bytes: aligned to `align` (the block is aligned to the header's size, a
// multiple of `align`), valid for `size` bytes, and freed or reallocated by undoing the offset with
// the same layout computation from the layout the caller passes back (the same `align`, and the
// size the block was last given).
unsafe impl<A: GlobalAlloc> GlobalAlloc for ExactScopes<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(outer) = outer_layout(layout.size(), layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: outer has a non-zero size (at least the header).
        let base = unsafe { self.inner.alloc(outer) };
        // SAFETY: base is null or a block of outer's layout.
        unsafe { self.finish(base, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let Some(outer) = outer_layout(layout.size(), layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: outer has a non-zero size (at least the header).
        let base = unsafe { self.inner.alloc_zeroed(outer) };
        // SAFETY: base is null or a block of outer's layout.
        unsafe { self.finish(base, layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr is a block we handed out (GlobalAlloc contract).
        let scope = unsafe { id_slot(ptr).read() };
        credit(scope, layout.size(), 1);
        let h = header(layout.align());
        // SAFETY: ptr − h is the inner block we allocated for this layout, and outer_layout
        // succeeded for it when it was allocated (or last reallocated to this size).
        unsafe {
            let outer = Layout::from_size_align_unchecked(layout.size() + h, h);
            self.inner.dealloc(ptr.sub(h), outer)
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let h = header(layout.align());
        let Some(new_outer) = outer_layout(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: ptr is a block we handed out (GlobalAlloc contract).
        let scope = unsafe { id_slot(ptr).read() };
        // SAFETY: ptr − h is the inner block for `layout` (see dealloc); the inner realloc keeps
        // the header's bytes (its first bytes), so the block keeps the scope it was allocated in.
        let base = unsafe {
            let outer = Layout::from_size_align_unchecked(layout.size() + h, h);
            self.inner.realloc(ptr.sub(h), outer, new_outer.size())
        };
        if base.is_null() {
            return base;
        }
        if new_size >= layout.size() {
            charge(scope, new_size - layout.size(), 0);
        } else {
            credit(scope, layout.size() - new_size, 0);
        }
        // SAFETY: base is a block of new_outer's layout, which starts with the h-byte header.
        unsafe { base.add(h) }
    }
}

impl<A: GlobalAlloc> ExactScopes<A> {
    /// Writes the header of a new block and charges its scope.
    ///
    /// # Safety
    /// `base` is null or a fresh block of `outer_layout(layout.size(), layout.align())`.
    #[inline(always)]
    unsafe fn finish(&self, base: *mut u8, layout: Layout) -> *mut u8 {
        if base.is_null() {
            return base;
        }
        let scope = thread::scope_outside_profiler();
        // SAFETY: the block is header + size bytes long, so base + header is inside it (or one
        // past the end for a zero-sized user block, still within the allocation's bounds).
        let user = unsafe { base.add(header(layout.align())) };
        // SAFETY: the id's slot lies in the header (see id_slot), which we own.
        unsafe { id_slot(user).write(scope) };
        charge(scope, layout.size(), 1);
        user
    }
}

/// Every label's exact figures, for labels that allocated under [`ExactScopes`].
pub(crate) fn all() -> Vec<ExactScopeStats> {
    scopes::all()
        .into_iter()
        .filter_map(|(id, label)| {
            let c = &COUNTERS[id as usize];
            // Ordering: see `charge`.
            let allocated_bytes = c.allocated_bytes.load(Ordering::Relaxed);
            (allocated_bytes > 0).then(|| ExactScopeStats {
                label,
                // Ordering: see `charge`.
                live_bytes: c.live_bytes.load(Ordering::Relaxed),
                // Ordering: see `charge`.
                live_objects: c.live_objects.load(Ordering::Relaxed),
                allocated_bytes,
            })
        })
        .collect()
}
