//! Stack capture from the program's own `.eh_frame` unwind tables, without libgcc (x86_64 and
//! aarch64 Linux).
//!
//! The DWARF call-frame information (CFI) that libgcc reads is already mapped in memory: every
//! loaded object's `PT_GNU_EH_FRAME` program header points at its `.eh_frame_hdr` (a sorted table
//! of function start → FDE), and that header points at `.eh_frame`. gimli parses those live bytes
//! and evaluates the FDE's CFI program to the row for an address; this module keeps, per return
//! address, only what a return address needs from that row (where the CFA is, relative to the
//! stack pointer or the frame pointer; where the return address and the caller's frame pointer
//! were saved), in a 1,024-slot cache of 512 sets of two. A frame seen before then costs a hash
//! lookup and one to three bounds-checked stack reads. See `docs/design.md` §8.
//!
//! The walker is one; what differs per architecture sits in its `arch` module: the registers the
//! walk carries, the rule a CFI row gives, one step. On x86_64 the CFA is `rsp` or `rbp` plus an
//! offset and the return address is at CFA − 8 (where `call` pushed it). On aarch64 the CFA is
//! `sp` or `x29` plus an offset, and the return address is the caller's `x30` (the CIE's
//! return-address column): saved below the CFA where the frame saved it, still in the register
//! where it did not (the first frame, whose registers the capture reads itself). Return addresses
//! signed by pointer authentication (`-mbranch-protection`, which the CFI marks with
//! `DW_CFA_AARCH64_negate_ra_state`) are stripped (`super::strip_return_address`).
//!
//! What makes it fit the sampled path:
//! - **No lock across the walk.** The object list is an immutable snapshot behind an `AtomicPtr`;
//!   the rule caches sit in a pool of 16 slots, taken and put back with one atomic swap each.
//!   glibc's loader-list lock is taken only inside `dl_iterate_phdr`, which reads the
//!   `dlpi_adds`/`dlpi_subs` counters: at a capture's first cache miss (before any unwind table
//!   is read) and every 64th capture on a cache, never across the walk; glibc never allocates
//!   while holding it, and it is recursive.
//! - **No allocation in the steady state.** The snapshot is rebuilt only when the loader's
//!   counters moved; a cache is allocated only when no pooled one is free; gimli evaluates CFI
//!   in fixed-size storage. Allocations happen under the caller's re-entrancy guard, so they go
//!   to the inner allocator unsampled.
//! - **No fault.** Stack reads are bounds-checked against `[own stack pointer, top of the
//!   thread's stack)`, which is live, mapped stack; the capture gives up (returns no frame) when
//!   the stack pointer is not inside the thread's stack (a signal handler on an alternate stack).
//!   Unwind tables are read only through a snapshot checked against the loader during the same
//!   capture, and only for return addresses of this thread's own frames: an object cannot be
//!   unloaded while a thread still has frames in it. A cached rule only reads the stack.
//! - **It stops where information ends**, as libgcc does: a return address outside every loaded
//!   object, or without an FDE, is recorded and ends the walk, and so does a frame whose CFI says
//!   the return address is undefined (`_start`, thread start). It never guesses with frame
//!   pointers.
//!
//! Limits: CFI it does not follow (a CFA given as a DWARF expression, as in glibc's signal
//! trampoline `__restore_rt`; a register saved in another register; a CFA offset that is not a
//! positive multiple of 8; on x86_64 a caller's `rbp` saved at or above the return address; on
//! aarch64 a saved `x29` or `x30` not below the CFA, or a frame over 256 KiB) ends the walk
//! there, so a stack captured inside a signal handler stops at the signal frame (allocating in a
//! signal handler is undefined anyway). After a library is unloaded and another loaded at the same
//! address, up to 63 captures per cache may still use a cached rule of the old one (a wrong
//! frame, never a bad read). Snapshots replaced after a `dlopen`/`dlclose` are kept, not freed,
//! because another thread may still be reading one: about a hundred bytes per object per load or
//! unload event seen.

/// Whether this unwinder exists on this target.
pub(crate) const SUPPORTED: bool = cfg!(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
));

#[cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
pub(crate) use walk::walk;

/// Without support the walk returns no frame (callers pick another unwinder: see `SUPPORTED`).
#[cfg(not(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
)))]
pub(crate) fn walk(_marker: usize, _buf: &mut [std::mem::MaybeUninit<u64>]) -> usize {
    0
}

// The parts, bottom to top (each uses only those before it): the architecture's registers, rule
// and step (`x86_64`, `aarch64`); `lookup`, the loaded objects and their unwind tables (the
// snapshot, the FDE search); `cache`, the rules by return address and the pool of caches; `walk`,
// the capture itself.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86_64;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use x86_64 as arch;
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
mod aarch64;
#[cfg(all(target_arch = "aarch64", target_os = "linux"))]
use aarch64 as arch;
#[cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
mod cache;
#[cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
mod lookup;
#[cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
mod walk;
