//! The aarch64 part of the walk: the registers it follows (`sp`, `x29`, and `x30`, which
//! holds the return address until a frame saves it), the rule a CFI row gives for them, and
//! one step. Every return address is stripped of its pointer-authentication code.

use gimli::{
    AArch64, CfaRule, Register, RegisterRule, UnwindContextStorage, UnwindTableRow, Vendor,
};

use super::super::strip_return_address;

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
