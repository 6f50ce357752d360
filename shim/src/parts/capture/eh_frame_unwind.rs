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
pub(crate) use imp::walk;

/// Without support the walk returns no frame (callers pick another unwinder: see `SUPPORTED`).
#[cfg(not(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
)))]
pub(crate) fn walk(_marker: usize, _buf: &mut [std::mem::MaybeUninit<u64>]) -> usize {
    0
}

#[cfg(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
mod imp {
    use std::cell::Cell;
    use std::mem::MaybeUninit;
    use std::ops::Range;
    use std::sync::atomic::{AtomicPtr, Ordering};

    use gimli::{
        BaseAddresses, EhFrame, EhFrameHdr, EhFrameOffset, EndianSlice, FrameDescriptionEntry,
        LittleEndian, ParsedEhFrameHdr, Register, RegisterRule, UnwindContext,
        UnwindContextStorage, UnwindSection, UnwindTableRow,
    };

    use crate::base::thread::{self, Guard};

    type Bytes = EndianSlice<'static, LittleEndian>;

    /// One loaded object's code range and unwind tables.
    ///
    /// Its `'static` slices are a promise kept by [`Snapshot`]'s use, not by the loader: they point
    /// into the object's mapped image, and are read only while the object is loaded.
    struct Object {
        code: Range<u64>,
        bases: BaseAddresses,
        eh_frame: EhFrame<Bytes>,
        /// Where `.eh_frame` is mapped (FDE pointers in the search table are addresses).
        eh_frame_avma: u64,
        hdr: ParsedEhFrameHdr<Bytes>,
        /// The search table read directly, when it has the encoding every linker writes.
        table: Option<SearchTable>,
    }

    impl Object {
        /// The FDE that covers `address`, if any.
        fn fde_for(&self, address: u64) -> Option<FrameDescriptionEntry<Bytes>> {
            match &self.table {
                Some(table) => {
                    let offset = table.fde_offset(address, self.eh_frame_avma)?;
                    let fde = self
                        .eh_frame
                        .fde_from_offset(&self.bases, offset, EhFrame::cie_from_offset)
                        .ok()?;
                    // The search finds the last FDE starting at or below `address`; it may end
                    // before it (a gap without unwind information).
                    fde.contains(address).then_some(fde)
                }
                None => self
                    .hdr
                    .table()?
                    .fde_for_address(
                        &self.eh_frame,
                        &self.bases,
                        address,
                        EhFrame::cie_from_offset,
                    )
                    .ok(),
            }
        }
    }

    /// An `.eh_frame_hdr` search table in the encoding GNU ld, gold, lld and mold write (version 1,
    /// `.eh_frame` pointer `pcrel|sdata4`, count `udata4`, entries `datarel|sdata4`): sorted pairs
    /// of 32-bit offsets from the header, (function start, FDE). Searched here with plain integer
    /// compares; gimli's generic search decodes every probed pointer through its encoding, which
    /// was a third of a cache miss's cost (about 1,300 of 3,700 instructions, 14 probes).
    struct SearchTable {
        /// `count` entries of 8 bytes.
        entries: &'static [u8],
        count: usize,
        /// Where the header is mapped: the base of the entries' offsets.
        hdr_avma: u64,
    }

    impl SearchTable {
        /// The table of the header `hdr` (mapped at `hdr_avma`), if it has the usual encoding and
        /// all its entries lie in `hdr`.
        fn of(hdr: &'static [u8], hdr_avma: u64) -> Option<SearchTable> {
            if hdr.get(..4)? != [1, 0x1b, 0x03, 0x3b] {
                return None;
            }
            let count =
                usize::try_from(u32::from_le_bytes(hdr.get(8..12)?.try_into().ok()?)).ok()?;
            let entries = hdr.get(12..count.checked_mul(8)?.checked_add(12)?)?;
            Some(SearchTable {
                entries,
                count,
                hdr_avma,
            })
        }

        /// The 32-bit offset at byte `at` of the entries, sign-extended.
        fn word(&self, at: usize) -> Option<i64> {
            let b = self.entries.get(at..at.checked_add(4)?)?;
            Some(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        }

        /// The `.eh_frame` offset of the last FDE whose function starts at or below `address`.
        fn fde_offset(&self, address: u64, eh_frame_avma: u64) -> Option<EhFrameOffset<usize>> {
            // The address relative to the header, as the entries are (a code address outside
            // ±2 GiB of it compares as whatever it wraps to, and then fails `contains`).
            let relative = address.wrapping_sub(self.hdr_avma) as i64;
            // The first entry starting above `address`.
            let (mut low, mut high) = (0, self.count);
            while low < high {
                let middle = low + (high - low) / 2;
                if self.word(middle * 8)? <= relative {
                    low = middle + 1;
                } else {
                    high = middle;
                }
            }
            let fde = self
                .hdr_avma
                .wrapping_add_signed(self.word(low.checked_sub(1)? * 8 + 4)?);
            usize::try_from(fde.checked_sub(eh_frame_avma)?)
                .ok()
                .map(EhFrameOffset)
        }
    }

    /// The loaded objects as of one pair of loader counters. Immutable once published.
    ///
    /// Why its bytes are mapped whenever they are read: a capture first brings the snapshot up to
    /// date with the loader counters, then reads unwind tables only for return addresses inside
    /// one of its objects' code ranges, reached by following the CFI from the capture's own frame.
    /// Those are frames of this thread, and an object cannot be unloaded while a thread still has
    /// frames in it.
    struct Snapshot {
        /// Sorted by code start, not overlapping.
        objects: Vec<Object>,
        /// `dlpi_adds + dlpi_subs` when built: both only grow, so a larger sum is newer; also the
        /// rule caches' generation.
        changes: u64,
        adds: u64,
        subs: u64,
    }

    impl Snapshot {
        /// The object whose code holds `address`; `hint` is the index of the one that held the
        /// previous address (most neighbouring frames share an object).
        #[inline]
        fn find(&self, address: u64, hint: &mut usize) -> Option<&Object> {
            if let Some(o) = self.objects.get(*hint) {
                if o.code.contains(&address) {
                    return Some(o);
                }
            }
            let i = self.objects.partition_point(|o| o.code.end <= address);
            let o = self.objects.get(i)?;
            if o.code.start <= address {
                *hint = i;
                Some(o)
            } else {
                None
            }
        }
    }

    /// The x86_64 part of the walk: the registers it follows (`rsp`, `rbp`; the return address is
    /// on the stack, where `call` pushed it), the rule a CFI row gives for them, and one step.
    #[cfg(target_arch = "x86_64")]
    mod arch {
        use gimli::{
            CfaRule, Register, RegisterRule, UnwindContextStorage, UnwindTableRow, Vendor, X86_64,
        };

        /// x86_64 CFI uses no vendor extension.
        pub(super) const VENDOR: Vendor = Vendor::Default;

        /// How to step from a frame to its caller, from the CFI row at its address: the canonical
        /// frame address (CFA) is `rsp` (or `rbp`, when `from_bp`) plus `cfa_offset`; the return
        /// address is stored at `CFA − 8` (where `call` pushed it: x86_64 CFI always says so, and a
        /// row that says otherwise ends the walk), the caller's `rbp` at `CFA + bp_at` (or kept,
        /// when `bp_at` is `KEPT`); the caller's `rsp` is the CFA.
        ///
        /// Eight bytes, so it travels in one register; and no separate "kind": a row the walk
        /// cannot follow (or the end of the stack) is [`Rule::STOP`], whose CFA equals `rsp`, which
        /// the walk's one bounds check (the CFA must lie above `rsp`) refuses. So a cached frame
        /// costs no branch on the kind of rule, only the `rsp`/`rbp` select.
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(C)]
        pub(super) struct Rule {
            /// A positive multiple of 8 (0 only in `Rule::STOP`).
            cfa_offset: i32,
            /// A multiple of 8 and at most −8 (or `KEPT`): an aligned word below the return
            /// address.
            bp_at: i16,
            from_bp: bool,
        }

        const KEPT: i16 = i16::MIN;

        impl Rule {
            /// Ends the walk: CFA = `rsp` + 0, never above `rsp`. Used where the return address is
            /// undefined (`_start`, thread start), where there is no CFI, and for CFI this walker
            /// does not follow (an expression, a register rule): libgcc stops at the first two as
            /// well.
            pub(super) const STOP: Rule = Rule {
                cfa_offset: 0,
                bp_at: KEPT,
                from_bp: false,
            };

            /// The rule a CFI row gives, for the three registers that matter here;
            /// `return_address` is the CIE's return-address column.
            pub(super) fn from_row<S: UnwindContextStorage<usize>>(
                row: &UnwindTableRow<usize, S>,
                return_address: Register,
            ) -> Rule {
                if return_address != X86_64::RA {
                    return Rule::STOP;
                }
                let (from_bp, cfa_offset) = match *row.cfa() {
                    CfaRule::RegisterAndOffset { register, offset } => {
                        // A CFA at or below the register it is computed from is never a caller's
                        // frame (and would read as `STOP` anyway).
                        // A multiple of 8, so the CFA keeps the word alignment of its base (x86_64
                        // CFI never says otherwise).
                        let Ok(offset @ 1..) = i32::try_from(offset) else {
                            return Rule::STOP;
                        };
                        if offset % 8 != 0 {
                            return Rule::STOP;
                        }
                        match register {
                            X86_64::RSP => (false, offset),
                            X86_64::RBP => (true, offset),
                            _ => return Rule::STOP,
                        }
                    }
                    CfaRule::Expression(_) => return Rule::STOP,
                };
                match row.register(X86_64::RA) {
                    Some(RegisterRule::Offset(-8)) => {}
                    // Undefined (the outermost frame) and anything else: the walk ends here.
                    _ => return Rule::STOP,
                }
                // The caller's rbp is saved below the return address (pushed after it), which the
                // walk relies on: it reads `CFA + bp_at` after checking only that it is at or
                // above `rsp`. x86_64 CFI never says otherwise; a row that does ends the walk.
                let bp_at = match row.register(X86_64::RBP) {
                    None | Some(RegisterRule::SameValue) => KEPT,
                    Some(RegisterRule::Offset(o)) if o % 8 == 0 && o <= -8 => {
                        match i16::try_from(o) {
                            Ok(o) if o != KEPT => o,
                            _ => return Rule::STOP,
                        }
                    }
                    _ => return Rule::STOP,
                };
                Rule {
                    cfa_offset,
                    bp_at,
                    from_bp,
                }
            }
        }

        /// The registers of the frame being unwound, and the top of the stack.
        ///
        /// Invariant (once `walk` has checked `sp` and set `top`): `[sp, top)` is live stack of
        /// this thread (from `walk`'s own frame, or above it, to the top of the stack mapping),
        /// and `sp` is 8-aligned.
        pub(super) struct Walk {
            pub(super) top: u64,
            pub(super) sp: u64,
            bp: u64,
        }

        /// The caller's own pc and registers (inlined into `walk`: its frame is the first one),
        /// with `top` still to be set.
        #[inline(always)]
        pub(super) fn here() -> (u64, Walk) {
            let (ip, sp, bp): (u64, u64, u64);
            // SAFETY: reads rip (via a rip-relative lea), rsp and rbp into variables; no memory
            // access, no side effect.
            unsafe {
                std::arch::asm!(
                    "lea {ip}, [rip]",
                    "mov {sp}, rsp",
                    "mov {bp}, rbp",
                    ip = out(reg) ip,
                    sp = out(reg) sp,
                    bp = out(reg) bp,
                    options(nomem, nostack, preserves_flags)
                )
            };
            (ip, Walk { top: 0, sp, bp })
        }

        impl Walk {
            /// Steps to the caller with `rule`: updates `sp` and `bp` and returns the caller's
            /// return address, or `None` where the stack ends or cannot be followed.
            #[inline(always)]
            pub(super) fn apply(&mut self, rule: &Rule) -> Option<u64> {
                // `rbp` rounded down to a word: in a frame that sets it up it is aligned already
                // (copied from the aligned `rsp`); elsewhere it may hold anything, and rounding
                // keeps the CFA aligned without a check per frame, as `cfa_offset` is a multiple
                // of 8.
                let base = if rule.from_bp { self.bp & !7 } else { self.sp };
                // Wrapping arithmetic: a CFA that wraps fails the bounds check below.
                let cfa = base.wrapping_add_signed(rule.cfa_offset.into());
                // The stack only grows towards the top: this bounds the walk, and refuses
                // `Rule::STOP`, whose CFA is `sp`.
                if cfa <= self.sp || cfa > self.top {
                    return None;
                }
                // SAFETY: sp < cfa ≤ top, both 8-aligned (the invariant; `base` is, and so is
                // `cfa_offset`, see `Rule::from_row`), and the check just above:
                // `cfa − 8` is an aligned word of `[sp, top)`, live stack by the invariant.
                let ret = unsafe { *(cfa.wrapping_sub(8) as *const u64) };
                if rule.bp_at != KEPT {
                    // `bp_at` ≤ −8 (`Rule::from_row`), so `at` ≤ cfa − 8: only its lower end
                    // needs a check (a wrapped `at` is above `cfa`, which `bp_at` ≤ −8 rules
                    // out).
                    let at = cfa.wrapping_add_signed(rule.bp_at.into());
                    if at < self.sp {
                        return None;
                    }
                    // SAFETY: sp ≤ at ≤ cfa − 8 < top, 8-aligned (cfa and bp_at are): a word of
                    // live stack by the invariant.
                    self.bp = unsafe { *(at as *const u64) };
                }
                // Keeps the invariant: sp < cfa ≤ top, cfa 8-aligned.
                self.sp = cfa;
                (ret >= 4096).then_some(ret)
            }
        }
    }

    /// The aarch64 part of the walk: the registers it follows (`sp`, `x29`, and `x30`, which
    /// holds the return address until a frame saves it), the rule a CFI row gives for them, and
    /// one step. Every return address is stripped of its pointer-authentication code.
    #[cfg(target_arch = "aarch64")]
    mod arch {
        use gimli::{
            AArch64, CfaRule, Register, RegisterRule, UnwindContextStorage, UnwindTableRow, Vendor,
        };

        use super::super::super::strip_return_address;

        /// `DW_CFA_AARCH64_negate_ra_state` (0x2d) is an AArch64 extension: gimli parses it only
        /// for this vendor (otherwise it is an unknown instruction, and every frame of code built
        /// with `-mbranch-protection` would end the walk).
        pub(super) const VENDOR: Vendor = Vendor::AArch64;

        /// How to step from a frame to its caller, from the CFI row at its address: the CFA is
        /// `sp` (or `x29`, when `from_fp`) plus `cfa_words` words; the caller's `x30` (the CIE's
        /// return-address column, so the return address) is at `CFA + 8·lr_at`, its `x29` at
        /// `CFA + 8·fp_at`, each kept where the row saves nothing (`KEPT`: a frame that has not
        /// saved `x30` yet still holds the return address in it); the caller's `sp` is the CFA.
        ///
        /// Eight bytes, as on x86_64, so a cache slot stays sixteen. Offsets count words, not
        /// bytes, because `x29` and `x30` are not always next to the CFA: GCC saves them at the
        /// bottom of the frame, `CFA − frame size` (16 bits of words reach 256 KiB below it).
        /// A row the walk cannot follow is [`Rule::STOP`], whose CFA equals `sp`.
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(C)]
        pub(super) struct Rule {
            /// Positive (0 only in `Rule::STOP`).
            cfa_words: u16,
            /// At most −1 (or `KEPT`): a word below the CFA.
            lr_at: i16,
            /// At most −1 (or `KEPT`): a word below the CFA.
            fp_at: i16,
            from_fp: bool,
        }

        const KEPT: i16 = i16::MIN;

        impl Rule {
            /// Ends the walk: CFA = `sp` + 0, never above `sp`. Used where the return address is
            /// undefined (`_start` and thread start say `.cfi_undefined x30`), where there is no
            /// CFI, and for CFI this walker does not follow (an expression, a register saved in
            /// another register, a slot not below the CFA or beyond 256 KiB of it).
            pub(super) const STOP: Rule = Rule {
                cfa_words: 0,
                lr_at: KEPT,
                fp_at: KEPT,
                from_fp: false,
            };

            /// The rule a CFI row gives, for the registers that matter here; `return_address` is
            /// the CIE's return-address column (`x30` in every aarch64 CIE; another ends the
            /// walk).
            ///
            /// `DW_CFA_AARCH64_negate_ra_state` toggles gimli's `RA_SIGN_STATE` pseudo-register
            /// (a constant 0 or 1): 1 where the saved `x30` is signed. The walk strips every
            /// return address it takes (`strip_return_address`, a no-op on an unsigned one), so
            /// the state only has to be one gimli tracks; anything else ends the walk.
            pub(super) fn from_row<S: UnwindContextStorage<usize>>(
                row: &UnwindTableRow<usize, S>,
                return_address: Register,
            ) -> Rule {
                if return_address != AArch64::X30 {
                    return Rule::STOP;
                }
                let (from_fp, cfa_words) = match *row.cfa() {
                    CfaRule::RegisterAndOffset { register, offset } => {
                        // A positive multiple of 8 (aarch64 keeps `sp` 16-aligned), so the CFA
                        // keeps the word alignment of its base.
                        let words = (offset % 8 == 0)
                            .then_some(offset / 8)
                            .and_then(|w| u16::try_from(w).ok())
                            .filter(|&w| w > 0);
                        let Some(words) = words else {
                            return Rule::STOP;
                        };
                        match register {
                            AArch64::SP => (false, words),
                            AArch64::X29 => (true, words),
                            _ => return Rule::STOP,
                        }
                    }
                    CfaRule::Expression(_) => return Rule::STOP,
                };
                let (Some(lr_at), Some(fp_at)) = (
                    saved_at(row.register(AArch64::X30)),
                    saved_at(row.register(AArch64::X29)),
                ) else {
                    return Rule::STOP;
                };
                match row.register(AArch64::RA_SIGN_STATE) {
                    None | Some(RegisterRule::Constant(0 | 1)) => {}
                    _ => return Rule::STOP,
                }
                Rule {
                    cfa_words,
                    lr_at,
                    fp_at,
                    from_fp,
                }
            }
        }

        /// Where a row saves a register, in words from the CFA: `KEPT` when it does not (the
        /// register holds the caller's value), `None` for a rule the walk does not follow
        /// (undefined, as the outermost frame's `x30`; another register; an expression; a slot
        /// not below the CFA, or further than `i16` words).
        fn saved_at(rule: Option<RegisterRule<usize>>) -> Option<i16> {
            match rule {
                None | Some(RegisterRule::SameValue) => Some(KEPT),
                Some(RegisterRule::Offset(o)) if o % 8 == 0 && o <= -8 => {
                    i16::try_from(o / 8).ok().filter(|&w| w != KEPT)
                }
                _ => None,
            }
        }

        /// The registers of the frame being unwound, and the top of the stack.
        ///
        /// Invariant (once `walk` has checked `sp` and set `top`): `[sp, top)` is live stack of
        /// this thread (from `walk`'s own frame, or above it, to the top of the stack mapping),
        /// and `sp` is 8-aligned. `lr` is `x30` as the frame holds it: signed or not.
        pub(super) struct Walk {
            pub(super) top: u64,
            pub(super) sp: u64,
            fp: u64,
            lr: u64,
        }

        /// The caller's own pc and registers (inlined into `walk`: its frame is the first one),
        /// with `top` still to be set. `x30` is read with the others: where the CFI row at this
        /// pc says it is not saved yet, it holds the return address.
        #[inline(always)]
        pub(super) fn here() -> (u64, Walk) {
            let (pc, sp, fp, lr): (u64, u64, u64, u64);
            // SAFETY: reads pc (the address of this `adr`), sp, x29 and x30 into variables; no
            // memory access, no side effect.
            unsafe {
                std::arch::asm!(
                    "adr {pc}, .",
                    "mov {sp}, sp",
                    "mov {fp}, x29",
                    "mov {lr}, x30",
                    pc = out(reg) pc,
                    sp = out(reg) sp,
                    fp = out(reg) fp,
                    lr = out(reg) lr,
                    options(nomem, nostack, preserves_flags)
                )
            };
            (pc, Walk { top: 0, sp, fp, lr })
        }

        impl Walk {
            /// Reads the word at `CFA + 8·words` if it lies in `[sp, cfa)`.
            #[inline(always)]
            fn saved(&self, cfa: u64, words: i16) -> Option<u64> {
                let at = cfa.wrapping_add_signed(i64::from(words) * 8);
                // One compare for both ends: a wrapped `at` (or one below `sp`) is far from
                // `sp` in unsigned distance.
                if at.wrapping_sub(self.sp) >= cfa - self.sp {
                    return None;
                }
                // SAFETY: sp ≤ at < cfa ≤ top (the check above and the caller's), 8-aligned
                // (cfa is, and the offset is whole words): a word of live stack by the
                // invariant.
                Some(unsafe { *(at as *const u64) })
            }

            /// Steps to the caller with `rule`: updates `sp`, `x29` and `x30` and returns the
            /// caller's return address (stripped), or `None` where the stack ends or cannot be
            /// followed.
            #[inline(always)]
            pub(super) fn apply(&mut self, rule: &Rule) -> Option<u64> {
                // `x29` rounded down to a word, as `rbp` on x86_64: aligned in a frame that sets
                // it up, anything elsewhere, and the CFA stays aligned without a check.
                let base = if rule.from_fp { self.fp & !7 } else { self.sp };
                // Wrapping arithmetic: a CFA that wraps fails the bounds check below.
                let cfa = base.wrapping_add(u64::from(rule.cfa_words) * 8);
                // The stack only grows towards the top: this bounds the walk, and refuses
                // `Rule::STOP`, whose CFA is `sp`.
                if cfa <= self.sp || cfa > self.top {
                    return None;
                }
                if rule.lr_at != KEPT {
                    self.lr = self.saved(cfa, rule.lr_at)?;
                }
                if rule.fp_at != KEPT {
                    self.fp = self.saved(cfa, rule.fp_at)?;
                }
                // Keeps the invariant: sp < cfa ≤ top, cfa 8-aligned.
                self.sp = cfa;
                let ret = strip_return_address(self.lr);
                (ret >= 4096).then_some(ret)
            }
        }
    }

    use arch::{Rule, Walk};

    /// gimli's working storage for evaluating one FDE's CFI program, fixed-size so that a cache
    /// miss never allocates: 32 register rules (x86_64 CFI names at most 17 registers; aarch64's
    /// at most 22 callee-saved ones and `RA_SIGN_STATE`) and 4
    /// remembered states (`DW_CFA_remember_state` nesting). A program that needs more is an error,
    /// and the walk stops there.
    struct FixedStorage;

    impl UnwindContextStorage<usize> for FixedStorage {
        type Rules = [(Register, RegisterRule<usize>); 32];
        type Stack = [UnwindTableRow<usize, Self>; 4];
    }

    /// Slots of a rule cache: a power of two, in sets of two indexed by a hash of the return
    /// address.
    ///
    /// Two ways, not one: with one slot per hash, two return addresses of one hot stack that hash
    /// alike evict each other on every capture, and which do depends on where the linker put the
    /// code. One build of the `kv-store` workload had such a pair: two misses per capture, about
    /// 9,800 instructions per capture instead of 1,550 (`bench/RESULTS.md`).
    const RULE_SLOTS: usize = 1024;

    /// One slot: an address and its rule; address 0 (never looked up) marks an empty slot.
    /// Sixteen bytes, so a slot is found with a shift, and a slot never straddles cache lines.
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    struct Entry {
        address: u64,
        rule: Rule,
    }

    /// Rules by return address, and what computing a missing one needs.
    ///
    /// Two parts, so that the walk can hold the slots (their address stays in a register across
    /// the cold miss call) and the miss path the rest, each borrowed on its own.
    struct RuleCache {
        entries: Box<[Entry; RULE_SLOTS]>,
        state: MissState,
    }

    /// What a miss needs besides the slots.
    struct MissState {
        /// The snapshot (`changes`) the rules were computed under; the slots are cleared when it
        /// differs, since an address may then belong to another object.
        generation: u64,
        /// The snapshot checked against the loader during the capture in progress (`None` at the
        /// start of every capture): the first miss of a capture checks, the others reuse it.
        checked: Option<&'static Snapshot>,
        /// Captures since this cache last compared its generation with the loader's counters.
        uses: u32,
        /// The index of the object that held the last missed address (neighbouring frames
        /// mostly share an object).
        hint: usize,
        context: Box<UnwindContext<usize, FixedStorage>>,
    }

    const NO_ENTRY: Entry = Entry {
        address: 0,
        rule: Rule::STOP,
    };

    impl RuleCache {
        fn new() -> RuleCache {
            // Built on the heap (a 16 KiB array is too much for a small thread's stack).
            let entries: Box<[Entry]> = vec![NO_ENTRY; RULE_SLOTS].into_boxed_slice();
            RuleCache {
                entries: entries.try_into().unwrap_or_else(|_| unreachable!()),
                state: MissState {
                    generation: u64::MAX,
                    checked: None,
                    uses: 0,
                    hint: 0,
                    context: Box::new(UnwindContext::new_in()),
                },
            }
        }
    }

    /// The rule for `address` (a return address minus one, or the first frame's pc).
    #[inline(always)]
    fn rule<'e>(
        entries: &'e mut [Entry; RULE_SLOTS],
        state: &mut MissState,
        address: u64,
    ) -> &'e Rule {
        // Fibonacci hashing on the low 32 bits (one multiply by an immediate; the slots only
        // need neighbouring addresses spread): the top 9 bits of the product index the 2^9 sets
        // of two slots, so no bounds check is needed.
        let set = ((address as u32).wrapping_mul(0x9e37_79b1) >> 23) as usize * 2;
        // An empty slot's address is 0, which is never looked up (`walk` stops below 4096).
        if entries[set].address != address {
            if entries[set + 1].address == address {
                return &entries[set + 1].rule;
            }
            state.miss(entries, address, set);
        }
        // Read from the slot on both paths, so a hit loads each field straight from it.
        &entries[set].rule
    }

    impl MissState {
        /// Brings the snapshot up to date with the loader and empties the slots if it changed.
        /// `None` if there is no snapshot (the loader gave no counters).
        fn sync(&mut self, entries: &mut [Entry; RULE_SLOTS]) -> Option<&'static Snapshot> {
            self.uses = 0;
            let snapshot = current_snapshot()?;
            if self.generation != snapshot.changes {
                entries.fill(NO_ENTRY);
                self.generation = snapshot.changes;
            }
            self.checked = Some(snapshot);
            Some(snapshot)
        }

        /// Computes and stores the rule for `address` in the first slot of the set at `set`
        /// (moving what was there to the second, and dropping what was in the second): the cold
        /// path.
        #[cold]
        #[inline(never)]
        fn miss(&mut self, entries: &mut [Entry; RULE_SLOTS], address: u64, set: usize) {
            let set = (set % RULE_SLOTS) & !1;
            let entry = self.compute(entries, address);
            // After `compute`, which may have emptied every slot (a new snapshot).
            entries[set + 1] = entries[set];
            entries[set] = entry;
        }

        /// The slot for `address`: its rule from the unwind tables.
        fn compute(&mut self, entries: &mut [Entry; RULE_SLOTS], address: u64) -> Entry {
            // The unwind tables are read only here, and only through a snapshot checked against
            // the loader during this capture (at its first miss: one `dl_iterate_phdr` per
            // capture, not per miss). That is as good as checking before every read: the tables
            // read are those of objects holding this thread's return addresses, which were
            // loaded before the capture began and cannot be unloaded while it runs, so the
            // snapshot names them correctly (see `Snapshot`).
            let checked = match self.checked {
                Some(snapshot) => Some(snapshot),
                None => self.sync(entries),
            };
            let Some(snapshot) = checked else {
                return Entry {
                    address,
                    rule: Rule::STOP,
                };
            };
            let rule = match snapshot.find(address, &mut self.hint) {
                None => Rule::STOP,
                Some(object) => object
                    .fde_for(address)
                    .and_then(|fde| {
                        let row = fde
                            .unwind_info_for_address(
                                &object.eh_frame,
                                &object.bases,
                                &mut self.context,
                                address,
                            )
                            .ok()?;
                        Some(Rule::from_row(row, fde.cie().return_address_register()))
                    })
                    .unwrap_or(Rule::STOP),
            };
            Entry { address, rule }
        }
    }

    /// The current snapshot; null until the first capture. Replaced ones are leaked (module docs).
    static SNAPSHOT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());

    /// Rule caches, taken by a capture with one swap and put back after it. A thread starts at
    /// the slot of its uid, so threads rarely meet in one.
    const CACHE_SLOTS: usize = 16;
    static CACHES: [AtomicPtr<RuleCache>; CACHE_SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; CACHE_SLOTS];

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

    /// A rule cache from the pool, starting at `slot`, or a new one (allocated under the
    /// re-entrancy guard).
    #[inline(always)]
    fn take_cache(slot: usize) -> Option<CacheBox> {
        // Ordering: Acquire pairs with the Release in `put_cache`, so the cache's contents
        // written by the thread that last used it are visible here.
        let p = CACHES[slot % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
        if !p.is_null() {
            return Some(CacheBox(p));
        }
        take_cache_elsewhere(slot)
    }

    /// [`take_cache`] when this thread's first slot is empty: the other slots, then a new cache.
    #[cold]
    #[inline(never)]
    fn take_cache_elsewhere(slot: usize) -> Option<CacheBox> {
        for i in 1..CACHE_SLOTS {
            // Ordering: as in `take_cache`.
            let p = CACHES[(slot + i) % CACHE_SLOTS].swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                return Some(CacheBox(p));
            }
        }
        let _guard = Guard::enter();
        Some(CacheBox(Box::into_raw(Box::new(RuleCache::new()))))
    }

    /// Puts a cache back into an empty slot, starting at `slot`, or frees it if all are full.
    fn put_cache(cache: CacheBox, slot: usize) {
        let p = cache.0;
        std::mem::forget(cache);
        for i in 0..CACHE_SLOTS {
            // Ordering: Release pairs with the Acquire swap in `take_cache`.
            if CACHES[(slot + i) % CACHE_SLOTS]
                .compare_exchange(
                    std::ptr::null_mut(),
                    p,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
        }
        drop(CacheBox(p));
    }

    /// An owned rule cache taken out of the pool.
    ///
    /// Invariant: `.0` came from `Box::into_raw` and nothing else owns it.
    struct CacheBox(*mut RuleCache);

    impl std::ops::Deref for CacheBox {
        type Target = RuleCache;
        fn deref(&self) -> &RuleCache {
            // SAFETY: the type's invariant: a live box owned by this value alone.
            unsafe { &*self.0 }
        }
    }

    impl std::ops::DerefMut for CacheBox {
        fn deref_mut(&mut self) -> &mut RuleCache {
            // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
            unsafe { &mut *self.0 }
        }
    }

    impl Drop for CacheBox {
        fn drop(&mut self) {
            let _guard = Guard::enter();
            // SAFETY: the type's invariant: we own the box.
            drop(unsafe { Box::from_raw(self.0) });
        }
    }

    /// The snapshot, rebuilt first if objects were loaded or unloaded since it was made.
    fn current_snapshot() -> Option<&'static Snapshot> {
        let mut check = Check {
            // Ordering: Acquire pairs with the Release publication in `publish`, so the
            // snapshot's contents are visible.
            current: SNAPSHOT.load(Ordering::Acquire),
            building: None,
        };
        // SAFETY: the callback matches dl_iterate_phdr's contract, only reads the info it is
        // handed, and neither walks the loaded objects nor unwinds; `check` outlives the call.
        unsafe {
            crate::base::loader::iterate_phdr(on_object, (&mut check as *mut Check).cast());
        }
        if let Some(built) = check.building.take() {
            publish(built);
        }
        // Ordering: as above.
        let p = SNAPSHOT.load(Ordering::Acquire);
        // SAFETY: published snapshots are never freed (module docs) and never mutated.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Replaces the snapshot with `built` unless a newer one was published meanwhile.
    fn publish(built: Box<Snapshot>) {
        let _guard = Guard::enter();
        let changes = built.changes;
        let new = Box::into_raw(built);
        // Ordering: Acquire to read the current one's `changes`; see `current_snapshot`.
        let mut current = SNAPSHOT.load(Ordering::Acquire);
        loop {
            // SAFETY: published snapshots are never freed.
            if !current.is_null() && unsafe { (*current).changes } >= changes {
                // SAFETY: `new` came from Box::into_raw above and was never published.
                drop(unsafe { Box::from_raw(new) });
                return;
            }
            // Ordering: Release publishes the snapshot's contents to the Acquire loads.
            match SNAPSHOT.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                // The replaced snapshot is leaked on purpose (module docs).
                Ok(_) => return,
                Err(now) => current = now,
            }
        }
    }

    /// State of one `dl_iterate_phdr` pass.
    struct Check {
        current: *mut Snapshot,
        /// Being built, when the counters moved.
        building: Option<Box<Snapshot>>,
    }

    /// `dl_iterate_phdr`'s callback: on the first object compares the loader counters with the
    /// snapshot's and stops if they match; otherwise collects every object.
    unsafe extern "C" fn on_object(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Check` passed by `current_snapshot`, alive and not otherwise
        // borrowed during the call; `info` points at a valid dl_phdr_info of `size` bytes.
        let (check, info) = unsafe { (&mut *data.cast::<Check>(), &*info) };
        if check.building.is_none() {
            // The counters are only present in newer callers' layouts: glibc says so by `size`.
            let has_counters = size
                >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs)
                    + std::mem::size_of::<libc::c_ulonglong>();
            if !has_counters {
                return 1;
            }
            let (adds, subs) = (info.dlpi_adds, info.dlpi_subs);
            if !check.current.is_null() {
                // SAFETY: published snapshots are never freed.
                let cur = unsafe { &*check.current };
                if cur.adds == adds && cur.subs == subs {
                    return 1;
                }
            }
            let _guard = Guard::enter();
            check.building = Some(Box::new(Snapshot {
                objects: Vec::new(),
                changes: adds.wrapping_add(subs),
                adds,
                subs,
            }));
        }
        let _guard = Guard::enter();
        if let Some(snapshot) = check.building.as_mut() {
            // SAFETY: `info` describes a loaded object (dl_iterate_phdr's contract).
            if let Some(object) = unsafe { object_of(info) } {
                let at = snapshot
                    .objects
                    .partition_point(|o| o.code.start < object.code.start);
                snapshot.objects.insert(at, object);
            }
        }
        0
    }

    /// The code range and unwind tables of one loaded object, if it has an `.eh_frame_hdr` with
    /// a search table.
    ///
    /// # Safety
    /// `info` describes an object loaded now (its program headers and segments are mapped).
    unsafe fn object_of(info: &libc::dl_phdr_info) -> Option<Object> {
        if info.dlpi_phdr.is_null() || info.dlpi_phnum == 0 {
            return None;
        }
        // SAFETY: dl_iterate_phdr hands a pointer to the object's `dlpi_phnum` program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let bias = info.dlpi_addr;
        let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
        let code = loads().filter(|p| p.p_flags & libc::PF_X != 0).try_fold(
            None::<Range<u64>>,
            |acc, p| {
                let r = p.p_vaddr..p.p_vaddr.checked_add(p.p_memsz)?;
                Some(Some(match acc {
                    None => r,
                    Some(a) => a.start.min(r.start)..a.end.max(r.end),
                }))
            },
        )??;
        let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME)?;
        // The file-backed end of the loaded segment holding `vaddr`: bytes up to it are mapped.
        let mapped_end = |vaddr: u64| {
            loads()
                .find(|p| p.p_vaddr <= vaddr && vaddr < p.p_vaddr.saturating_add(p.p_filesz))
                .map(|p| p.p_vaddr + p.p_filesz)
        };
        // Bytes from `vaddr` to the end of its segment's file-backed part, in the live image.
        let live = |vaddr: u64| -> Option<Bytes> {
            let len = usize::try_from(mapped_end(vaddr)? - vaddr).ok()?;
            let ptr = bias.wrapping_add(vaddr) as *const u8;
            // SAFETY: `vaddr..vaddr + len` lies in a PT_LOAD segment's file-backed part of an
            // object loaded now (the caller's contract), so the bytes are mapped and, after
            // relocation, read-only. They stay mapped while the object is loaded, which is
            // whenever a snapshot reads them (see `Snapshot`).
            Some(EndianSlice::new(
                unsafe { std::slice::from_raw_parts(ptr, len) },
                LittleEndian,
            ))
        };
        let hdr_avma = bias.wrapping_add(hdr.p_vaddr);
        let hdr_bytes = live(hdr.p_vaddr)?;
        let bases = BaseAddresses::default()
            .set_eh_frame_hdr(hdr_avma)
            .set_text(bias.wrapping_add(code.start));
        let parsed = EhFrameHdr::new(hdr_bytes.slice(), LittleEndian)
            .parse(&bases, 8)
            .ok()?;
        parsed.table()?;
        // The header points at .eh_frame (an absolute address once its encoding is applied).
        let eh_frame_avma = match parsed.eh_frame_ptr() {
            gimli::Pointer::Direct(a) => a,
            gimli::Pointer::Indirect(_) => return None,
        };
        let eh_frame_bytes = live(eh_frame_avma.checked_sub(bias)?)?;
        let mut eh_frame = EhFrame::new(eh_frame_bytes.slice(), LittleEndian);
        eh_frame.set_address_size(8);
        eh_frame.set_vendor(arch::VENDOR);
        let bases = bases.set_eh_frame(eh_frame_avma);
        // Parsed again with the complete bases (the table's entries are relative to the header).
        let hdr = EhFrameHdr::new(hdr_bytes.slice(), LittleEndian)
            .parse(&bases, 8)
            .ok()?;
        Some(Object {
            code: bias.checked_add(code.start)?..bias.checked_add(code.end)?,
            bases,
            eh_frame,
            eh_frame_avma,
            table: SearchTable::of(hdr_bytes.slice(), hdr_avma),
            hdr,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Addresses spread over the code of every loaded object that has a search table in
        /// the usual encoding, with the snapshot they were found through.
        fn sampled_addresses() -> (&'static Snapshot, Vec<u64>) {
            let snapshot = current_snapshot().expect("dl_iterate_phdr gives the loader counters");
            let mut addresses = Vec::new();
            for object in snapshot.objects.iter().filter(|o| o.table.is_some()) {
                let step = ((object.code.end - object.code.start) / 3_000).max(1);
                addresses.extend((object.code.start..object.code.end).step_by(step as usize));
            }
            (snapshot, addresses)
        }

        #[test]
        fn the_direct_table_search_finds_the_fde_gimlis_search_finds() {
            let (snapshot, addresses) = sampled_addresses();
            assert!(addresses.len() > 3_000, "{} addresses", addresses.len());
            let (mut found, mut hint) = (0, 0);
            for address in addresses {
                let object = snapshot.find(address, &mut hint).expect("inside an object");
                let direct = object.fde_for(address).map(|f| f.offset());
                let gimli = object
                    .hdr
                    .table()
                    .and_then(|t| {
                        t.fde_for_address(
                            &object.eh_frame,
                            &object.bases,
                            address,
                            EhFrame::cie_from_offset,
                        )
                        .ok()
                    })
                    .map(|f| f.offset());
                assert_eq!(direct, gimli, "{address:#x}");
                found += usize::from(direct.is_some());
            }
            assert!(found > 1_000, "only {found} addresses had an FDE");
        }

        #[test]
        fn two_addresses_that_hash_to_one_set_are_both_kept() {
            let (_, addresses) = sampled_addresses();
            let set_of = |a: u64| (a as u32).wrapping_mul(0x9e37_79b1) >> 23;
            let mut first_in_set = std::collections::HashMap::new();
            let (a, b) = addresses
                .iter()
                .find_map(|&b| {
                    let a = *first_in_set.entry(set_of(b)).or_insert(b);
                    (a != b).then_some((a, b))
                })
                .expect("some two addresses share a set");
            let mut cache = RuleCache::new();
            let RuleCache { entries, state } = &mut cache;
            let entries: &mut [Entry; RULE_SLOTS] = entries;
            let (rule_a, rule_b) = (*rule(entries, state, a), *rule(entries, state, b));
            // Alternating between them (as one stack holding both does) never evicts either.
            for _ in 0..3 {
                state.checked = None;
                assert_eq!(*rule(entries, state, a), rule_a);
                assert_eq!(*rule(entries, state, b), rule_b);
                let set = set_of(a) as usize * 2;
                let mut kept = [entries[set].address, entries[set + 1].address];
                kept.sort_unstable();
                assert_eq!(kept, [a.min(b), a.max(b)]);
            }
        }
    }
}
