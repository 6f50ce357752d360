//! The capture: the thread's stack bounds, then one step per frame with the rule cached for its
//! address.

use std::cell::Cell;
use std::mem::MaybeUninit;

use super::arch::{self, Walk};
use super::cache::{
    put_cache, rule, take_cache, Entry, MissState, RuleCache, CACHE_SLOTS, RULE_SLOTS,
};
use crate::base::thread;

/// What a capture needs to know about its thread, kept in one thread-local so that a capture
/// makes one thread-local access: the stack's bounds and where in the cache pool to start.
#[derive(Clone, Copy)]
struct ThisThread {
    /// The stack as `[bottom, top)`; `top` ≤ 1 when unknown (0: not asked yet).
    bottom: usize,
    top: usize,
    /// The pool slot this thread tries first (its uid modulo the pool's size), so threads
    /// rarely meet in one.
    slot: usize,
}

thread_local! {
    static THIS_THREAD: Cell<ThisThread> =
        const { Cell::new(ThisThread { bottom: 0, top: 0, slot: 0 }) };
}

/// This thread's [`ThisThread`], asked for on its first capture.
#[inline(always)]
fn this_thread() -> ThisThread {
    let unknown = ThisThread {
        bottom: 1,
        top: 1,
        slot: 0,
    };
    THIS_THREAD
        .try_with(|t| {
            if t.get().top == 0 {
                t.set(ask_this_thread());
            }
            t.get()
        })
        .unwrap_or(unknown)
}

#[cold]
#[inline(never)]
fn ask_this_thread() -> ThisThread {
    let (bottom, top) = super::super::ask_stack_bounds().unwrap_or((1, 1));
    ThisThread {
        bottom,
        top,
        slot: thread::uid() as usize % CACHE_SLOTS,
    }
}

/// Unwinds the calling thread with the `.eh_frame` tables, writing return addresses whose
/// caller's stack pointer lies above `marker` (frames up to and including the one holding
/// `marker` are the profiler's). Returns the number written into `buf`.
#[inline(never)]
pub(crate) fn walk(marker: usize, buf: &mut [MaybeUninit<u64>]) -> usize {
    if buf.is_empty() {
        return 0;
    }
    let (ip, mut walk) = arch::here();
    let sp = walk.sp;
    let this = this_thread();
    let top = this.top as u64;
    // `sp` is in this function's frame: everything from it to the top of the thread's stack
    // is live stack. Outside that stack (an alternate signal stack) we do not know the bounds.
    // `sp` is 16-aligned here (the ABI's alignment at a call, kept by the prologue), which
    // `Walk::apply` relies on.
    if top <= 1 || !(this.bottom as u64..top).contains(&sp) || top - sp < 16 || sp % 8 != 0 {
        return 0;
    }
    let Some(mut cache) = take_cache(this.slot) else {
        return 0;
    };
    // Cached rules are reused without asking the loader (a miss always asks first), but not
    // for long: every 64th capture on a cache compares it with the loader's counters, so a
    // rule of an unloaded object does not outlive it by much (it could only give a wrong
    // frame, never a bad read: rules only read the stack, through `Walk::apply`).
    let RuleCache { entries, state } = &mut *cache;
    let entries: &mut [Entry; RULE_SLOTS] = entries;
    state.checked = None;
    state.uses += 1;
    if state.uses >= 64 && state.sync(entries).is_none() {
        put_cache(cache, this.slot);
        return 0;
    }
    walk.top = top;
    // The first frame is this function's at `ip`; callers' are looked up at their return
    // address minus one, inside the call instruction (a call may be a function's last).
    // Frames up to the marker's are the profiler's own: stepped over, not recorded. The
    // caller's stack pointer is the callee's CFA, which is what libgcc's `_Unwind_GetCFA`
    // compares with the marker.
    let mut address = ip;
    let first = loop {
        let Some(ret) = walk.step(entries, state, address) else {
            break None;
        };
        if walk.sp as usize > marker {
            break Some(ret);
        }
        address = ret - 1;
    };
    // Two loops rather than a marker test per frame. The slots after the first are walked
    // as an iterator (a pointer compared with the end), so writing one needs no bounds check.
    let mut n = 0;
    if let (Some(mut ret), Some((head, tail))) = (first, buf.split_first_mut()) {
        head.write(ret);
        n = 1;
        for slot in tail {
            match walk.step(entries, state, ret - 1) {
                Some(next) => ret = next,
                None => break,
            }
            slot.write(ret);
            n += 1;
        }
    }
    put_cache(cache, this.slot);
    n
}

impl Walk {
    /// Steps from the frame at `address` (its pc, or a return address minus one) to its
    /// caller with the rule cached for `address`: returns the caller's return address, or
    /// `None` where the stack ends or cannot be followed.
    #[inline(always)]
    fn step(
        &mut self,
        entries: &mut [Entry; RULE_SLOTS],
        state: &mut MissState,
        address: u64,
    ) -> Option<u64> {
        self.apply(rule(entries, state, address))
    }
}
