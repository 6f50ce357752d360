//! Stack capture on the sampled path: a frame-pointer walker and libgcc's unwinder.
//!
//! Both write return addresses, innermost first, into a caller-provided fixed buffer, and both
//! start at the caller of the function that took the `marker` (the address of a local variable in
//! the profiler's outermost slow-path frame), so the profiler's own frames never show up.
//!
//! - **Frame pointers** ([`Unwinder::FramePointer`], x86_64 and aarch64): follows the saved frame
//!   pointer chain. Every frame pointer must be 8-aligned, strictly increasing, and lie between the
//!   walker's own stack pointer and the top of the thread's stack (`pthread_getattr_np`, asked once
//!   per thread), so the walk only reads live stack memory: it never faults and takes no lock.
//!   It is only complete when every function on the stack keeps frame pointers.
//! - **libgcc** ([`Unwinder::Backtrace`], `backtrace::trace_unsynchronized`): reads DWARF unwind
//!   tables, so it is complete without frame pointers, but it is slower and `_Unwind_Find_FDE`
//!   takes a process-wide lock.

use std::mem::MaybeUninit;
use std::sync::RwLock;

use crate::base::thread;

/// Largest `max_frames` accepted: the on-stack capture buffer's size.
pub const MAX_FRAMES_LIMIT: usize = 256;

/// The stack unwinder in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwinder {
    /// Frame-pointer chain walk: no lock, about a nanosecond per frame.
    FramePointer,
    /// `backtrace::trace_unsynchronized` (libgcc's DWARF unwinder).
    Backtrace,
}

/// Held for reading around every libgcc unwind and for writing across `fork`, so that a child is
/// never born while another thread holds libgcc's unwinder lock.
pub(crate) static UNWIND_LOCK: RwLock<()> = RwLock::new(());

/// Whether this build keeps frame pointers well enough for [`Unwinder::FramePointer`]: the
/// frame-pointer walk from a probe function must return at least 3 frames, and its first 8 (or
/// all, if fewer) must be exactly libgcc's first frames. Decided once, at first use.
pub(crate) fn frame_pointers_work() -> bool {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return false;
    }
    probe_frame_pointers()
}

#[inline(never)]
fn probe_frame_pointers() -> bool {
    let marker = 0u8;
    let marker = std::hint::black_box(&marker) as *const u8 as usize;
    let mut by_fp = [MaybeUninit::<u64>::uninit(); 16];
    let mut by_libgcc = [MaybeUninit::<u64>::uninit(); 16];
    let by_fp = capture_uninit(Unwinder::FramePointer, marker, &mut by_fp);
    let by_libgcc = capture_uninit(Unwinder::Backtrace, marker, &mut by_libgcc);
    let (n_fp, n_libgcc) = (by_fp.len(), by_libgcc.len());
    // The walk may end early where code without frame pointers starts (glibc's thread start, say):
    // what it returns must be exactly libgcc's first frames, with none missing in between.
    let k = n_fp.min(n_libgcc).min(8);
    k >= 3 && by_fp[..k] == by_libgcc[..k]
}

/// Captures the current stack into `buf` with `unwinder`, skipping every frame up to and including
/// the one holding `marker`. Returns the number of frames written.
#[cfg(test)]
pub(crate) fn capture(unwinder: Unwinder, marker: usize, buf: &mut [u64]) -> usize {
    // SAFETY: `MaybeUninit<u64>` has the layout of `u64`, and the walkers only ever write
    // initialised values into the buffer, so `buf` stays fully initialised.
    let buf = unsafe { &mut *(buf as *mut [u64] as *mut [MaybeUninit<u64>]) };
    capture_uninit(unwinder, marker, buf).len()
}

/// [`capture`] into an uninitialised buffer (no need to zero up to 2 KiB per sample): returns the
/// frames written, the initialised front of `buf`.
#[inline(never)]
pub(crate) fn capture_uninit(
    unwinder: Unwinder,
    marker: usize,
    buf: &mut [MaybeUninit<u64>],
) -> &[u64] {
    let n = match unwinder {
        Unwinder::FramePointer => walk_frame_pointers(marker, buf),
        Unwinder::Backtrace => {
            let _held = UNWIND_LOCK.read().unwrap_or_else(|e| e.into_inner());
            walk_libgcc(marker, buf)
        }
    };
    // SAFETY: both walkers wrote `buf[..n]` (and return n ≤ buf.len()); MaybeUninit<u64> has the
    // layout of u64.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u64>(), n) }
}

fn stack_top() -> usize {
    // Kept in the thread's state, the line the sampled path has in cache anyway.
    thread::with_thread(|t| {
        if t.stack_top.get() == 0 {
            t.stack_top.set(ask_stack_top().unwrap_or(1));
        }
        t.stack_top.get()
    })
    .unwrap_or(1)
}

fn ask_stack_top() -> Option<usize> {
    // SAFETY: pthread_attr_t is plain data that pthread_getattr_np initialises; we destroy it after
    // reading the stack bounds out of it.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || addr.is_null() {
            return None;
        }
        (addr as usize).checked_add(size)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn frame_pointer() -> usize {
    let fp: usize;
    // SAFETY: reads a register into a variable; no memory access, no side effect.
    unsafe {
        std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    fp
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn frame_pointer() -> usize {
    let fp: usize;
    // SAFETY: reads a register into a variable; no memory access, no side effect.
    unsafe {
        std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    fp
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
fn frame_pointer() -> usize {
    0
}

/// Walks the frame-pointer chain (`[fp] = caller's fp`, `[fp + 8] = return address` on both
/// x86_64 and aarch64). Never faults: every address read lies in `[own stack pointer, stack top)`,
/// which is mapped stack of the current thread.
///
/// The bounds are checked once: the first frame pointer must be at or above `low`, and every next
/// one strictly above the previous (so all are), word-aligned, and with its two-word record below
/// `top`: per frame that is one mask, two compares and no call.
#[inline(never)]
pub(crate) fn walk_frame_pointers(marker: usize, buf: &mut [MaybeUninit<u64>]) -> usize {
    let here = 0u8;
    let low = std::hint::black_box(&here) as *const u8 as usize;
    let top = stack_top();
    const WORD: usize = std::mem::size_of::<usize>();
    if top <= 1 || buf.is_empty() || top < 2 * WORD {
        return 0;
    }
    // The highest frame pointer whose two-word record ends at or below `top`.
    let last = top - 2 * WORD;
    let mut fp = frame_pointer();
    if fp < low {
        return 0;
    }
    // Frames up to and including the marker's are the profiler's own: follow them unrecorded.
    loop {
        if fp % WORD != 0 || fp > last {
            return 0;
        }
        if fp > marker {
            break;
        }
        // SAFETY: low ≤ fp ≤ top − 16 (fp ≥ low by the check before the loop and because the
        // chain strictly increases), and [low, top) is this thread's live stack (low is the
        // address of a local of this very function, top the end of the stack mapping), which is
        // mapped and readable; fp is word-aligned.
        let next = unsafe { *(fp as *const usize) };
        if next <= fp {
            return 0;
        }
        fp = next;
    }
    let mut n = 0;
    loop {
        // SAFETY: as above: low ≤ fp ≤ top − 16, fp word-aligned, all within this thread's
        // mapped stack (checked before entering this loop and at the end of each round).
        let (next, ret) = unsafe { (*(fp as *const usize), *((fp + WORD) as *const usize)) };
        if ret < 4096 {
            break;
        }
        buf[n].write(ret as u64);
        n += 1;
        if n == buf.len() || next <= fp || next % WORD != 0 || next > last {
            break;
        }
        fp = next;
    }
    n
}

/// Unwinds with libgcc, skipping frames whose stack pointer is at or below `marker`: the unwinder's,
/// the profiler's, and the frame holding the marker.
#[inline(never)]
pub(crate) fn walk_libgcc(marker: usize, buf: &mut [MaybeUninit<u64>]) -> usize {
    let mut n = 0;
    if buf.is_empty() {
        return 0;
    }
    // SAFETY: trace_unsynchronized is unsafe only because it does not take the backtrace crate's
    // global lock, which exists to serialise Windows' dbghelp; on Linux it calls libgcc's
    // `_Unwind_Backtrace`, which is thread-safe. The callback neither panics nor allocates.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            // libgcc reports each frame's own stack pointer (the bottom of its frame): frames at
            // or below the marker are the unwinder's, the profiler's, and the marker's frame.
            if (frame.sp() as usize) <= marker {
                return true;
            }
            let ip = frame.ip() as u64;
            if ip < 4096 {
                return false;
            }
            buf[n].write(ip);
            n += 1;
            n < buf.len()
        });
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn capture_here(unwinder: Unwinder, buf: &mut [u64]) -> usize {
        let marker = 0u8;
        let marker = std::hint::black_box(&marker) as *const u8 as usize;
        capture(unwinder, marker, buf)
    }

    #[test]
    fn libgcc_capture_finds_the_callers() {
        let mut buf = [0u64; 64];
        let n = capture_here(Unwinder::Backtrace, &mut buf);
        assert!(n >= 3, "only {n} frames");
        // The first frame is inside this test function (the caller of `capture_here`).
        let mut names = Vec::new();
        backtrace::resolve((buf[0]) as *mut std::ffi::c_void, |s| {
            names.push(s.name().map(|n| format!("{n:#}")).unwrap_or_default())
        });
        assert!(
            names
                .iter()
                .any(|n| n.contains("libgcc_capture_finds_the_callers")),
            "{names:?}"
        );
    }

    #[inline(never)]
    fn capture_both(fp: &mut [u64], gcc: &mut [u64]) -> (usize, usize) {
        let marker = 0u8;
        let marker = std::hint::black_box(&marker) as *const u8 as usize;
        (
            capture(Unwinder::FramePointer, marker, fp),
            capture(Unwinder::Backtrace, marker, gcc),
        )
    }

    #[test]
    fn frame_pointer_walk_never_faults_and_agrees_with_libgcc_when_frame_pointers_are_kept() {
        // Whatever this build does with frame pointers, the walk stops safely, and every frame it
        // returns is a real return address that libgcc also sees from the same point.
        let mut fp = [0u64; 64];
        let mut gcc = [0u64; 64];
        let (n_fp, n_gcc) = capture_both(&mut fp, &mut gcc);
        assert!(n_gcc >= 3);
        if !frame_pointers_work() {
            // Without frame pointers the chain may hold anything; not faulting is the property.
            return;
        }
        assert!(n_fp >= 3);
        for f in &fp[..n_fp] {
            assert!(
                gcc[..n_gcc].contains(f),
                "{f:#x} not among {:x?}",
                &gcc[..n_gcc]
            );
        }
    }

    #[test]
    fn captures_respect_the_buffer_size() {
        let mut buf = [0u64; 2];
        assert!(capture_here(Unwinder::Backtrace, &mut buf) <= 2);
        assert!(capture_here(Unwinder::FramePointer, &mut buf) <= 2);
    }
}
