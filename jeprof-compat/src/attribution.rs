//! Which function of a stack a report charges: pprof's `--hide` and `--show_from`, as our reports
//! apply them. The rules are the charging engine's ([`jeprof_dumpfmt::charge`], rule 3), one for
//! the workspace, which the page the shim serves calls too; this module names them where the
//! reports take them.
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

pub use jeprof_dumpfmt::charge::{Attribution, Cut};
