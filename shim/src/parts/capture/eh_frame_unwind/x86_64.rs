//! The x86_64 part of the walk: the registers it follows (`rsp`, `rbp`; the return address is
//! on the stack, where `call` pushed it), the rule a CFI row gives for them, and one step.

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
            Some(RegisterRule::Offset(o)) if o % 8 == 0 && o <= -8 => match i16::try_from(o) {
                Ok(o) if o != KEPT => o,
                _ => return Rule::STOP,
            },
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
