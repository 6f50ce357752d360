//! Which function of a stack a report charges: pprof's `--hide` and `--show_from`, as our reports
//! apply them.
//!
//! jeprof charges a stack's figure (its *flat*) to the innermost function left once allocator
//! frames are removed. In a Rust program that is nearly always the standard library
//! (`alloc::raw_vec::RawVecInner<A>::try_allocate_in (inline)`,
//! `hashbrown::raw::RawTable<T,A>::reserve_rehash`), so "which of my functions holds the memory"
//! needs the cum column. An [`Attribution`] moves flat to the first function that is the
//! program's own:
//!
//! - `hide`: walking a stack from the leaf (after the allocator skip), the functions that match are
//!   passed over and flat goes to the first one that does not. In the text report, the diff and
//!   folded stacks the passed-over functions keep their cum (they still did allocate the memory);
//!   pprof output drops them from the sample, as pprof's own `-hide` does, since pprof computes
//!   flat from the sample's first location. A stack whose every function matches is left as it is:
//!   there is no function of the program's to charge. [`crate::names::DEFAULT_HIDE`] is the list
//!   used when none is given.
//! - `show_from`: pprof's `-show_from`: the functions from the root down to the outermost one that
//!   matches are dropped (it and its callees stay); a stack with no match keeps no function (its
//!   figure stays in the total, as in pprof).
//!
//! Both match function names without the ` (inline)` suffix the text report adds.

use regex::Regex;

use crate::names;

/// How a report charges a stack's figure (see the module docs). The default charges it as jeprof
/// does: no function hidden, the whole stack shown.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    /// Functions passed over, from the leaf, when charging flat.
    pub hide: Option<Regex>,
    /// Functions toward the root of the outermost match are dropped.
    pub show_from: Option<Regex>,
}

/// Where an [`Attribution`] cuts a stack of functions (innermost first): functions
/// `flat..shown` carry the figure, the first of them as flat; `0..flat` are hidden leaf-side
/// functions (cum only, in the text report) and `shown..` are dropped by `show_from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Index of the function charged with flat (equal to `shown` when nothing is shown).
    pub flat: usize,
    /// One past the last function kept.
    pub shown: usize,
}

impl Attribution {
    /// The attribution our own reports use by default: [`names::DEFAULT_HIDE`], nothing dropped
    /// from the root.
    pub fn user_code() -> Attribution {
        Attribution {
            hide: Some(names::default_hide()),
            show_from: None,
        }
    }

    /// Whether this attribution changes nothing (jeprof's own charging).
    pub fn is_jeprof(&self) -> bool {
        self.hide.is_none() && self.show_from.is_none()
    }

    /// Whether `function` (as a report names it, ` (inline)` or not) is passed over.
    pub fn hides(&self, function: &str) -> bool {
        self.hide
            .as_ref()
            .is_some_and(|re| re.is_match(bare(function)))
    }

    /// Whether `function` is where `show_from` starts a stack.
    pub fn shows_from(&self, function: &str) -> bool {
        self.show_from
            .as_ref()
            .is_some_and(|re| re.is_match(bare(function)))
    }

    /// Where the attribution cuts a stack of `len` functions, innermost first, given which of them
    /// `hidden` and which `show_from` matches (by index).
    pub fn cut(
        &self,
        len: usize,
        hidden: impl Fn(usize) -> bool,
        starts: impl Fn(usize) -> bool,
    ) -> Cut {
        let shown = if self.show_from.is_some() {
            // The outermost match, kept with everything it called.
            (0..len).rev().find(|&i| starts(i)).map_or(0, |i| i + 1)
        } else {
            len
        };
        let flat = if self.hide.is_some() {
            // Nothing of the program's own (`None`): charged as jeprof charges it, at 0.
            (0..shown).find(|&i| !hidden(i)).unwrap_or_default()
        } else {
            0
        };
        Cut { flat, shown }
    }
}

/// A function name without the text report's ` (inline)` suffix.
fn bare(function: &str) -> &str {
    function.strip_suffix(" (inline)").unwrap_or(function)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut_of(attribution: &Attribution, stack: &[&str]) -> Cut {
        attribution.cut(
            stack.len(),
            |i| attribution.hides(stack[i]),
            |i| attribution.shows_from(stack[i]),
        )
    }

    #[test]
    fn flat_moves_past_standard_library_frames_to_the_programs_own() {
        let stack = [
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in (inline)",
            "alloc::vec::Vec<T,A>::push",
            "my_app::cache::Cache::insert",
            "my_app::main",
            "std::rt::lang_start_internal",
        ];
        let cut = cut_of(&Attribution::user_code(), &stack);
        assert_eq!(cut, Cut { flat: 2, shown: 5 });
        // jeprof's charging: the leaf.
        assert_eq!(
            cut_of(&Attribution::default(), &stack),
            Cut { flat: 0, shown: 5 }
        );
    }

    #[test]
    fn a_stack_of_only_hidden_frames_is_charged_as_jeprof_charges_it() {
        let stack = [
            "hashbrown::raw::RawTable<T,A>::reserve_rehash",
            "std::thread::spawn",
        ];
        assert_eq!(
            cut_of(&Attribution::user_code(), &stack),
            Cut { flat: 0, shown: 2 }
        );
    }

    #[test]
    fn show_from_keeps_the_outermost_match_and_its_callees_like_pprof() {
        // pprof's example: frames [A, B, C, B] from the root; show_from B keeps [B, C, B].
        let stack = ["B", "C", "B", "A"];
        let show = |re: &str| Attribution {
            hide: None,
            show_from: Some(Regex::new(re).unwrap()),
        };
        assert_eq!(cut_of(&show("^B$"), &stack), Cut { flat: 0, shown: 3 });
        assert_eq!(cut_of(&show("^C$"), &stack), Cut { flat: 0, shown: 2 });
        assert_eq!(cut_of(&show("^A$"), &stack), Cut { flat: 0, shown: 4 });
        // No match: no function left.
        assert_eq!(cut_of(&show("^D$"), &stack), Cut { flat: 0, shown: 0 });
    }
}
