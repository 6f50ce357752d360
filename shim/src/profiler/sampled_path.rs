//! The sampled path (capture, allocate from the sampled arena, record), frees of sampled objects,
//! and the count of samples dropped on the way.

use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use jeprof_dumpfmt::Estimate;
use tikv_jemalloc_sys as jem;

use crate::base::settings;
use crate::base::thread::{self, Guard};
use crate::parts::capture::{self, MAX_FRAMES_LIMIT};
use crate::parts::live_samples::{self, LiveSample};
use crate::parts::thread_totals::{self, ChargeError};
use crate::parts::{allocation_windows, sampled_arena, scopes, stacks, triggers};

use super::peak;

pub(crate) use crate::api::sampled_path::Dropped;

static DROPPED_ARENA_EXHAUSTED: AtomicU64 = AtomicU64::new(0);
static DROPPED_ARENA_UNAVAILABLE: AtomicU64 = AtomicU64::new(0);
static DROPPED_STACK_TABLE_FULL: AtomicU64 = AtomicU64::new(0);

/// Samples dropped since start.
pub(crate) fn dropped() -> Dropped {
    Dropped {
        // Ordering: a statistics counter, read on its own.
        arena_exhausted: DROPPED_ARENA_EXHAUSTED.load(Ordering::Relaxed),
        // Ordering: a statistics counter, read on its own.
        arena_unavailable: DROPPED_ARENA_UNAVAILABLE.load(Ordering::Relaxed),
        // Ordering: a statistics counter, read on its own.
        stack_table_full: DROPPED_STACK_TABLE_FULL.load(Ordering::Relaxed),
    }
}

/// Allocates a sampled object from the sampled arena and records it. `None` when the sample is
/// dropped (the reason is counted); the caller then allocates from the inner allocator.
///
/// Inlined into its callers (the allocator's slow paths, the C API's), so that the capture starts
/// in the frame that holds `marker`: every frame between the capture and the marker is unwound and
/// then thrown away (about 40 instructions each with `.eh_frame`), and this function's own would
/// be one more. The rest of the work, [`allocate_and_record`], stays out of line.
///
/// # Safety
/// `layout` has a non-zero size (the `GlobalAlloc::alloc` contract). `marker` is the address of a
/// local variable of the caller's frame (frames up to it are not recorded).
#[inline(always)]
pub(crate) unsafe fn alloc_sampled(
    layout: Layout,
    zeroed: bool,
    period: u64,
    marker: usize,
) -> Option<*mut u8> {
    let _guard = Guard::enter();
    let mut buf = [const { MaybeUninit::<u64>::uninit() }; MAX_FRAMES_LIMIT];
    let max = settings::max_frames().clamp(1, MAX_FRAMES_LIMIT);
    let frames = capture::capture_uninit(capture::current_unwinder(), marker, &mut buf[..max]);
    // SAFETY: forwarded contract (layout has a non-zero size).
    unsafe { allocate_and_record(layout, zeroed, period, frames) }
}

/// [`alloc_sampled`] once the stack is captured: allocates from the sampled arena and records the
/// sample under `frames`. Runs inside the caller's re-entrancy guard.
///
/// # Safety
/// `layout` has a non-zero size.
#[inline(never)]
unsafe fn allocate_and_record(
    layout: Layout,
    zeroed: bool,
    period: u64,
    frames: &[u64],
) -> Option<*mut u8> {
    let size = layout.size();
    let flags = match sampled_arena::flags(size, layout.align(), settings::arena_size()) {
        Ok(flags) => flags,
        Err(sampled_arena::Unavailable::NoArena) => {
            // Ordering: a statistics counter.
            DROPPED_ARENA_UNAVAILABLE.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let zero = if zeroed { jem::MALLOCX_ZERO } else { 0 };
    // SAFETY: size is non-zero (caller contract) and the flags name a live arena.
    let ptr = unsafe { jem::mallocx(size, flags | zero) }.cast::<u8>();
    if ptr.is_null() {
        // Our extent hook is the only thing that fails in that arena: the range is exhausted.
        // Ordering: a statistics counter.
        DROPPED_ARENA_EXHAUSTED.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    // jemalloc's usable size. `nallocx` computes the size class that `mallocx` with this size and
    // alignment returns, which is what `sallocx` would read back from the allocation's metadata,
    // without that lookup (a cache miss or two on a path that runs every 512 KiB).
    // SAFETY: nallocx only computes a size class; size is non-zero.
    let usable = unsafe { jem::nallocx(size, sampled_arena::align_flags(size, layout.align())) };
    // SAFETY: ptr was just returned by mallocx.
    debug_assert_eq!(usable, unsafe { jem::sallocx(ptr.cast(), 0) });
    let hash = stacks::stack_hash(frames);
    let max_stacks = settings::max_stacks();
    // The thread's table, locked from here to the charge: it also caches the probabilities.
    let mut table = thread_totals::this_thread();
    let mut record = LiveSample {
        usable,
        stack: 0,
        probability: table.sample_probability(size, period),
        thread: thread::uid(),
        scope: thread::scope(),
    };
    // From the probability the record keeps, so that its free recomputes exactly this.
    let estimate = record.estimate();
    let charged = table.charge(frames, hash, &estimate, || {
        stacks::intern(frames, hash, max_stacks)
    });
    drop(table);
    let stack_id = match charged {
        Ok(id) => id,
        Err(ChargeError::TableFull) => {
            // SAFETY: ptr came from mallocx with these flags and this size, and was never exposed.
            unsafe { jem::sdallocx(ptr.cast(), size, flags) };
            // Ordering: a statistics counter.
            DROPPED_STACK_TABLE_FULL.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    if record.scope != 0 {
        scopes::charge(record.scope, &estimate);
    }
    record.stack = stack_id;
    live_samples::shard_of(ptr as usize)
        .lock()
        .insert(ptr as usize, record);
    let bytes = weight_bytes(&estimate);
    // After the insert, so that a peak snapshot this sample triggers holds it.
    peak::on_sample(stack_id, &estimate, bytes);
    if let Some(live) = triggers::on_sample(bytes, settings::dump_interval()) {
        peak::on_new_high(live);
    }
    if allocation_windows::any_open() {
        allocation_windows::on_alloc(ptr as usize, stack_id, &estimate);
    }
    Some(ptr)
}

/// What a sample of `estimate` adds to the process-wide figures (`triggers`) and its free
/// subtracts: the same on both paths, from the same estimate.
fn weight_bytes(estimate: &Estimate) -> u64 {
    triggers::weight_bytes(triggers::counted(estimate.bytes))
}

/// Forgets and frees a sampled object.
///
/// # Safety
/// `ptr` lies in the sampled arena ([`sampled_arena::RangeCopy::contains`]) and was allocated
/// with `layout` (the `GlobalAlloc::dealloc` contract).
pub(crate) unsafe fn free_sampled(ptr: *mut u8, layout: Layout) {
    forget_sampled(ptr);
    let flags = sampled_arena::free_flags(layout.size(), layout.align());
    // SAFETY: ptr was allocated by mallocx in the sampled arena with this size and alignment
    // (caller contract), so this size and the same alignment flags free it; jemalloc finds the
    // arena from the object itself.
    unsafe { jem::sdallocx(ptr.cast(), layout.size(), flags) };
}

/// Removes the live sample at `ptr` from the profile (and from the open windows).
fn forget_sampled(ptr: *mut u8) {
    let removed = live_samples::shard_of(ptr as usize)
        .lock()
        .remove(ptr as usize);
    if let Some(record) = removed {
        let estimate = record.estimate();
        let bytes = weight_bytes(&estimate);
        triggers::on_free(bytes);
        peak::on_free(record.stack, &estimate, bytes);
        if allocation_windows::any_open() {
            // The window's per-stack table may grow: keep that out of the profile.
            let _guard = Guard::enter();
            allocation_windows::on_free(ptr as usize);
        }
    }
}

/// Forgets and frees a sampled object whose size and alignment the caller does not know (C's
/// `free`, `crate::c_api`): jemalloc's unsized free reads them from the object's metadata.
///
/// # Safety
/// `ptr` lies in the sampled arena and is a live object allocated there by [`alloc_sampled`].
pub(crate) unsafe fn free_sampled_unsized(ptr: *mut u8) {
    forget_sampled(ptr);
    // A 1-byte, 1-aligned object needs no alignment flag, so these are the thread's sampled
    // tcache flag alone, which is all an unsized free takes.
    let flags = sampled_arena::free_flags(1, 1);
    // SAFETY: ptr is a live object of the sampled arena (caller contract); dallocx finds its size
    // and arena from jemalloc's own metadata.
    unsafe { jem::dallocx(ptr.cast(), flags) };
}
