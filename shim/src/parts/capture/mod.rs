//! Stack capture on the sampled path: a frame-pointer walker, an `.eh_frame` unwinder, and
//! libgcc's unwinder.
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
//! - **`.eh_frame`** ([`Unwinder::EhFrame`], x86_64 and aarch64 Linux; [`eh_frame_unwind`]): reads the loaded
//!   objects' DWARF unwind tables in place (gimli) and caches a compact rule per return address:
//!   complete without frame pointers, the same frames as libgcc, no lock held across the walk, no
//!   allocation once warm, never faults.
//! - **libgcc** ([`Unwinder::Backtrace`], `backtrace::trace_unsynchronized`): reads DWARF unwind
//!   tables, so it is complete without frame pointers, but it is slower and `_Unwind_Find_FDE`
//!   takes a process-wide lock.
//!
//! [`current_unwinder`] says which one the `unwinder` setting selects; for `unwinder:auto` this
//! module probes them once and keeps the outcome ([`settings::auto_unwinder`]).

use std::mem::MaybeUninit;

use crate::base::loader::UNWIND_LOCK;
use crate::base::settings::{self, UnwinderChoice};
use crate::base::thread::{self, Guard};

mod eh_frame_unwind;

pub(crate) use crate::api::capture::{Unwinder, MAX_FRAMES_LIMIT};

/// The unwinder in use now: the one the `unwinder` setting names, `auto` resolved by
/// [`auto_unwinder`].
pub(crate) fn current_unwinder() -> Unwinder {
    match settings::unwinder_choice() {
        UnwinderChoice::FramePointer => Unwinder::FramePointer,
        UnwinderChoice::Backtrace => Unwinder::Backtrace,
        UnwinderChoice::EhFrame => Unwinder::EhFrame,
        UnwinderChoice::Auto => auto_unwinder(),
    }
}

/// `unwinder:auto`: probed at first use, then read back. Frame pointers when complete (cheapest);
/// else the `.eh_frame` tables; libgcc only when neither agrees with it.
fn auto_unwinder() -> Unwinder {
    let mut probed = settings::auto_unwinder();
    if probed == UnwinderChoice::Auto {
        let _guard = Guard::enter();
        probed = if frame_pointers_work() {
            UnwinderChoice::FramePointer
        } else if eh_frame_works() {
            UnwinderChoice::EhFrame
        } else {
            UnwinderChoice::Backtrace
        };
        settings::remember_auto_unwinder(probed);
    }
    match probed {
        UnwinderChoice::FramePointer => Unwinder::FramePointer,
        UnwinderChoice::EhFrame => Unwinder::EhFrame,
        UnwinderChoice::Backtrace | UnwinderChoice::Auto => Unwinder::Backtrace,
    }
}

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

/// Whether the `.eh_frame` unwinder exists here and, walking from a probe function, returns at
/// least 3 frames that are exactly libgcc's first frames (up to 16). Decided once, at first use.
fn eh_frame_works() -> bool {
    eh_frame_unwind::SUPPORTED && probe_eh_frame()
}

#[inline(never)]
fn probe_eh_frame() -> bool {
    let marker = 0u8;
    let marker = std::hint::black_box(&marker) as *const u8 as usize;
    let mut by_eh = [MaybeUninit::<u64>::uninit(); 16];
    let mut by_libgcc = [MaybeUninit::<u64>::uninit(); 16];
    let by_eh = capture_uninit(Unwinder::EhFrame, marker, &mut by_eh);
    let by_libgcc = capture_uninit(Unwinder::Backtrace, marker, &mut by_libgcc);
    by_eh.len() >= 3 && by_eh == by_libgcc
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
        Unwinder::EhFrame => eh_frame_unwind::walk(marker, buf),
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
    ask_stack_bounds().map(|(_, top)| top)
}

/// This thread's stack as `(lowest address, one past the highest)`, from `pthread_getattr_np`.
fn ask_stack_bounds() -> Option<(usize, usize)> {
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
        Some((addr as usize, (addr as usize).checked_add(size)?))
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

/// A return address without its pointer-authentication code (PAC).
///
/// aarch64 code built with `-mbranch-protection=standard` (or `pac-ret`) signs the return address
/// in `x30` on entry (`paciasp`, or `pacibsp` for the B key) before saving it, which puts a
/// code in the address's unused top bits; the frame's CFI says so with
/// `DW_CFA_AARCH64_negate_ra_state`. `xpaclri` removes the code from `x30` (the top bits become
/// copies of bit 55, zero for a user-space address), whichever instruction key signed it. It is
/// encoded as `HINT #7`, a NOP on a CPU without pointer authentication, where `paciasp` is a NOP
/// too and nothing was signed. On an unsigned address it changes nothing, so both walkers strip
/// every return address they take from the stack or from `x30`, without consulting the CFI's
/// sign state (libgcc and LLVM's libunwind strip only where it is set: the same addresses). The
/// alternative, masking with the virtual address size, would have to know that size.
///
/// Elsewhere return addresses are never signed, and this is the identity.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub(crate) fn strip_return_address(ret: u64) -> u64 {
    let mut lr = ret;
    // SAFETY: `xpaclri` (written as `hint #7`, which every assembler accepts) only rewrites x30,
    // given here as the operand: no memory access, no flags, no other register; a NOP on CPUs
    // without pointer authentication.
    unsafe {
        std::arch::asm!("hint #7", inout("x30") lr, options(nomem, nostack, preserves_flags));
    }
    lr
}

/// See the aarch64 version: return addresses are never signed on this target.
#[cfg(not(target_arch = "aarch64"))]
#[inline(always)]
pub(crate) fn strip_return_address(ret: u64) -> u64 {
    ret
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
        if !fp.is_multiple_of(WORD) || fp > last {
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
        // Saved as `x30` was on aarch64: signed where the code uses pointer authentication.
        let ret = strip_return_address(ret as u64);
        if ret < 4096 {
            break;
        }
        buf[n].write(ret);
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

    /// Both DWARF unwinders from the same call site: (`.eh_frame` frames, libgcc frames).
    #[inline(never)]
    fn capture_eh_and_libgcc() -> (Vec<u64>, Vec<u64>) {
        let marker = 0u8;
        let marker = std::hint::black_box(&marker) as *const u8 as usize;
        let mut eh = [0u64; MAX_FRAMES_LIMIT];
        let mut gcc = [0u64; MAX_FRAMES_LIMIT];
        let n_eh = capture(Unwinder::EhFrame, marker, &mut eh);
        let n_gcc = capture(Unwinder::Backtrace, marker, &mut gcc);
        (eh[..n_eh].to_vec(), gcc[..n_gcc].to_vec())
    }

    /// Recurses `depth` more times through two non-inlined functions and an inlined closure
    /// (chosen by `shape`'s bits), then captures with both unwinders.
    #[inline(never)]
    fn descend(depth: u32, shape: u64) -> (Vec<u64>, Vec<u64>) {
        if depth == 0 {
            return capture_eh_and_libgcc();
        }
        let r = match shape & 3 {
            0 => descend(depth - 1, shape >> 2),
            1 => descend_other(depth - 1, shape >> 2),
            _ => {
                // A closure called once is inlined into this frame: it adds no frame of its own,
                // for either unwinder.
                let inlined = |d: u32| descend(d, (shape >> 2) ^ u64::from(d));
                inlined(depth - 1)
            }
        };
        std::hint::black_box(r)
    }

    #[inline(never)]
    fn descend_other(depth: u32, shape: u64) -> (Vec<u64>, Vec<u64>) {
        // A frame of another size, so the two functions' unwind rules differ.
        let pad = std::hint::black_box([depth as u64; 9]);
        let r = descend(depth, shape.rotate_left(7) ^ pad[3]);
        std::hint::black_box(r)
    }

    fn assert_same_stacks(eh: &[u64], gcc: &[u64], what: &str) {
        if !eh_frame_unwind::SUPPORTED {
            assert!(eh.is_empty());
            return;
        }
        assert!(
            gcc.len() >= 3,
            "{what}: libgcc found only {} frames",
            gcc.len()
        );
        assert_eq!(eh, gcc, "{what}: .eh_frame and libgcc stacks differ");
    }

    #[test]
    fn eh_frame_stacks_equal_libgccs_at_random_depths_and_shapes() {
        // A fixed LCG: the property runs over 300 depth/shape pairs, the same on every run.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..300 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let depth = (state >> 33) as u32 % 60;
            let shape = state.rotate_left(17);
            let (eh, gcc) = descend(depth, shape);
            assert_same_stacks(&eh, &gcc, &format!("round {round}, depth {depth}"));
            assert!(gcc.len() as u32 > depth, "round {round}: a frame per level");
        }
    }

    #[test]
    fn eh_frame_stacks_equal_libgccs_on_another_thread_and_when_the_buffer_is_full() {
        std::thread::spawn(|| {
            let (eh, gcc) = descend(300, 0x1234_5678);
            assert_eq!(gcc.len(), MAX_FRAMES_LIMIT);
            assert_same_stacks(&eh, &gcc, "a spawned thread, 300 deep");
        })
        .join()
        .unwrap();
    }

    extern "C" fn compare_and_capture(a: *const libc::c_void, b: *const libc::c_void) -> i32 {
        // SAFETY: qsort passes pointers to two elements of the `u32` array being sorted.
        let (a, b) = unsafe { (*a.cast::<u32>(), *b.cast::<u32>()) };
        QSORT_STACKS.with(|s| {
            if s.borrow().is_none() {
                *s.borrow_mut() = Some(descend(5, 0xdead_beef));
            }
        });
        a.cmp(&b) as i32
    }

    thread_local! {
        static QSORT_STACKS: std::cell::RefCell<Option<(Vec<u64>, Vec<u64>)>> =
            const { std::cell::RefCell::new(None) };
    }

    #[test]
    fn eh_frame_stacks_equal_libgccs_through_a_shared_library() {
        // libc's qsort calls back into this binary: the stack crosses libc.so's frames, whose
        // unwind tables are another object's.
        let mut v: Vec<u32> = (0..64u32).rev().collect();
        // SAFETY: a valid array of 64 u32 and a comparator that reads two of its elements.
        unsafe {
            libc::qsort(
                v.as_mut_ptr().cast(),
                v.len(),
                std::mem::size_of::<u32>(),
                Some(compare_and_capture),
            )
        };
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let (eh, gcc) = QSORT_STACKS.with(|s| s.borrow_mut().take()).unwrap();
        assert_same_stacks(&eh, &gcc, "through qsort");
        // The walk really went through libc: some frame lies in libc's own code.
        let in_libc = |frame: u64| {
            // SAFETY: Dl_info is plain data (pointers and integers) for which zeroes are valid.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            // SAFETY: dladdr only reads the loader's tables for an address and fills `info`.
            let found = unsafe { libc::dladdr(frame as *const libc::c_void, &mut info) } != 0;
            // SAFETY: on success dli_fname is a NUL-terminated path the loader keeps.
            found
                && !info.dli_fname.is_null()
                && unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
                    .to_string_lossy()
                    .contains("libc.so")
        };
        assert!(
            gcc.iter().any(|&f| in_libc(f - 1)),
            "no frame in libc: {gcc:x?}"
        );
    }

    #[test]
    fn eh_frame_capture_agrees_after_a_library_is_loaded() {
        // Loading an object moves the loader's counter: the next capture rebuilds its module
        // list and still agrees with libgcc.
        let (eh, gcc) = descend(3, 7);
        assert_same_stacks(&eh, &gcc, "before dlopen");
        let name = c"libm.so.6";
        // SAFETY: dlopen of a system library that has no constructors with preconditions.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        let (eh, gcc) = descend(4, 9);
        assert_same_stacks(&eh, &gcc, "after dlopen");
        if !handle.is_null() {
            // SAFETY: a handle dlopen returned, closed once.
            unsafe { libc::dlclose(handle) };
        }
        let (eh, gcc) = descend(5, 11);
        assert_same_stacks(&eh, &gcc, "after dlclose");
    }

    /// `tests/programs/signed_frames.c` built into a shared library and loaded: C frames between
    /// a Rust caller and a Rust callback.
    struct CFrames {
        call: unsafe extern "C" fn(extern "C" fn(), i32) -> i32,
        raw_lr: *const u64,
        _dir: tempfile::TempDir,
    }

    impl CFrames {
        /// Built `-O2` with or without frame pointers; on aarch64 with
        /// `-mbranch-protection=standard`, so its return addresses are signed.
        fn build(frame_pointers: bool) -> CFrames {
            let dir = tempfile::tempdir().unwrap();
            let library = dir.path().join("libsigned_frames.so");
            let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/programs/signed_frames.c");
            // The target's compiler (`CC_<triple>`: under qemu-aarch64 the cross compiler runs
            // as a host process, since user-mode emulation hands `execve` to the host kernel).
            let compiler = jeprof_conformance::target_c_compiler();
            let mut command = std::process::Command::new(&compiler);
            command
                .args(["-O2", "-shared", "-fPIC"])
                .arg(if frame_pointers {
                    "-fno-omit-frame-pointer"
                } else {
                    "-fomit-frame-pointer"
                });
            if cfg!(target_arch = "aarch64") {
                command.arg("-mbranch-protection=standard");
            }
            let out = command
                .arg("-o")
                .arg(&library)
                .arg(&source)
                .output()
                .unwrap_or_else(|e| panic!("cannot run the C compiler {compiler}: {e}"));
            assert!(
                out.status.success(),
                "{compiler} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let path =
                std::ffi::CString::new(library.into_os_string().into_encoded_bytes()).unwrap();
            // SAFETY: dlopen of the library just built, which has no constructors. It stays
            // loaded (never closed): stacks captured through it are resolved afterwards.
            let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            assert!(!handle.is_null(), "dlopen of the built library failed");
            // SAFETY: dlsym on a live handle with NUL-terminated names.
            let (call, raw_lr) = unsafe {
                (
                    libc::dlsym(handle, c"signed_frames_call".as_ptr()),
                    libc::dlsym(handle, c"signed_frames_raw_lr".as_ptr()),
                )
            };
            assert!(!call.is_null() && !raw_lr.is_null());
            CFrames {
                // SAFETY: the C source defines `int signed_frames_call(void (*)(void), int)`.
                call: unsafe {
                    std::mem::transmute::<
                        *mut libc::c_void,
                        unsafe extern "C" fn(extern "C" fn(), i32) -> i32,
                    >(call)
                },
                raw_lr: raw_lr.cast(),
                _dir: dir,
            }
        }

        /// Calls into the C frames, `depth` levels of pairs, which call `capture` back; returns
        /// the raw `x30` the deepest C frame saved (its return address, signed or not).
        fn call(&self, depth: i32, capture: extern "C" fn()) -> u64 {
            // SAFETY: the function the library defines, with a callback it calls once.
            unsafe { (self.call)(capture, depth) };
            // SAFETY: `signed_frames_raw_lr` is a `uintptr_t` of the loaded library, written
            // by the call above on this thread.
            unsafe { self.raw_lr.read_volatile() }
        }
    }

    /// Whether this CPU signs return addresses (`paciasp` is a NOP without pointer
    /// authentication). `qemu-aarch64 -cpu max` emulates it.
    fn return_addresses_are_signed() -> bool {
        #[cfg(target_arch = "aarch64")]
        // SAFETY: getauxval only reads the auxiliary vector.
        return unsafe { libc::getauxval(libc::AT_HWCAP) } & libc::HWCAP_PACA != 0;
        #[cfg(not(target_arch = "aarch64"))]
        false
    }

    /// Checks that the stripped `raw` (the return address the deepest C frame saved) is a frame
    /// of `stack`, and returns whether `raw` was signed.
    fn assert_found(raw: u64, stack: &[u64], what: &str) -> bool {
        let stripped = strip_return_address(raw);
        // The code lives in the low bits; the authentication code only in the top ones.
        assert_eq!(
            raw & 0xffff_ffff_ffff,
            stripped & 0xffff_ffff_ffff,
            "{what}"
        );
        assert!(
            stack.contains(&stripped),
            "{what}: {stripped:#x} (raw {raw:#x}) not among {stack:x?}"
        );
        raw != stripped
    }

    /// Checks that some of `signed` calls' return addresses were signed exactly when this CPU
    /// signs them. Some, not all: the code has as few as 7 bits (with top-byte-ignore), so one
    /// signed address in 128 carries a zero code; over three calls with different stack
    /// pointers (the code's modifier) all are zero once in 2 million.
    fn assert_signed_where_supported(signed: usize, calls: usize) {
        if return_addresses_are_signed() {
            assert!(signed > 0, "none of {calls} return addresses was signed");
        } else {
            assert_eq!(signed, 0, "signed return addresses on a CPU without PAuth");
        }
    }

    thread_local! {
        static C_STACKS: std::cell::RefCell<Option<[Vec<u64>; 3]>> =
            const { std::cell::RefCell::new(None) };
    }

    /// (`.eh_frame`, libgcc, frame pointers) from the same call site.
    #[inline(never)]
    fn capture_three() -> [Vec<u64>; 3] {
        let marker = 0u8;
        let marker = std::hint::black_box(&marker) as *const u8 as usize;
        let mut stacks = [[0u64; MAX_FRAMES_LIMIT]; 3];
        let [eh, gcc, fp] = &mut stacks;
        let n_eh = capture(Unwinder::EhFrame, marker, eh);
        let n_gcc = capture(Unwinder::Backtrace, marker, gcc);
        let n_fp = capture(Unwinder::FramePointer, marker, fp);
        [
            eh[..n_eh].to_vec(),
            gcc[..n_gcc].to_vec(),
            fp[..n_fp].to_vec(),
        ]
    }

    extern "C" fn capture_from_c() {
        let stacks = descend_then(3, capture_three);
        C_STACKS.with(|s| *s.borrow_mut() = Some(stacks));
    }

    /// Recurses `depth` Rust frames, then runs `f`.
    #[inline(never)]
    fn descend_then<R>(depth: u32, f: fn() -> R) -> R {
        let r = if depth == 0 {
            f()
        } else {
            descend_then(depth - 1, f)
        };
        std::hint::black_box(r)
    }

    /// Frames of `stack` inside the loaded C library.
    fn c_frames(stack: &[u64]) -> usize {
        stack
            .iter()
            .filter(|&&frame| {
                // SAFETY: Dl_info is plain data for which zeroes are valid; dladdr only reads the
                // loader's tables, and on success dli_fname is a NUL-terminated path it keeps.
                unsafe {
                    let mut info: libc::Dl_info = std::mem::zeroed();
                    libc::dladdr((frame - 1) as *const libc::c_void, &mut info) != 0
                        && !info.dli_fname.is_null()
                        && std::ffi::CStr::from_ptr(info.dli_fname)
                            .to_bytes()
                            .ends_with(b"libsigned_frames.so")
                }
            })
            .count()
    }

    #[test]
    fn eh_frame_stacks_equal_libgccs_through_c_frames_without_frame_pointers_and_signed_returns() {
        let c = CFrames::build(false);
        let mut signed = 0;
        for depth in [0, 1, 4] {
            let raw = c.call(depth, capture_from_c);
            let [eh, gcc, _] = C_STACKS.with(|s| s.borrow_mut().take()).unwrap();
            let what = format!("C depth {depth}");
            // signed_frames_call, then level_b and level_a per level.
            assert_eq!(c_frames(&gcc), 2 * depth as usize + 3, "{what}: {gcc:x?}");
            signed += usize::from(assert_found(raw, &gcc, &what));
            assert_same_stacks(&eh, &gcc, &what);
        }
        assert_signed_where_supported(signed, 3);
    }

    #[test]
    fn frame_pointer_stacks_strip_signed_returns_through_c_frames_that_keep_frame_pointers() {
        let c = CFrames::build(true);
        let mut signed = 0;
        for depth in [1, 2, 3] {
            let raw = c.call(depth, capture_from_c);
            let [_, gcc, fp] = C_STACKS.with(|s| s.borrow_mut().take()).unwrap();
            let what = format!("C depth {depth}");
            signed += usize::from(assert_found(raw, &gcc, &what));
            if !frame_pointers_work() {
                // This build's own frames do not keep frame pointers: the chain breaks in them.
                continue;
            }
            // Through the C frames and back into Rust's, the walk returns libgcc's frames, the
            // stripped return addresses among them.
            assert_eq!(c_frames(&fp), 2 * depth as usize + 3, "{what}: {fp:x?}");
            assert_eq!(fp, gcc[..fp.len()], "{what}: frame pointers against libgcc");
            assert_found(raw, &fp, &what);
        }
        assert_signed_where_supported(signed, 3);
    }

    #[test]
    fn captures_respect_the_buffer_size() {
        let mut buf = [0u64; 2];
        assert!(capture_here(Unwinder::Backtrace, &mut buf) <= 2);
        assert!(capture_here(Unwinder::FramePointer, &mut buf) <= 2);
        assert!(capture_here(Unwinder::EhFrame, &mut buf) <= 2);
    }
}
