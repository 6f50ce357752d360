//! jeprof's `--text` and `--collapsed` reports, and flame graphs, from resolved profiles.
//!
//! The text report follows jeprof 5.3.1's `FilterAndPrint` step by step (`docs/design.md` §5, §6):
//! 1. `Total:` is the sum of every entry, before anything is removed.
//! 2. `RemoveUninterestingFrames`: walking each stack from the leaf, a frame whose function is an
//!    allocator function throws away itself and every frame seen so far.
//! 3. `--focus`: keep the stacks with a frame whose address or name matches.
//! 4. `TranslateStack`: addresses above `0x7fffffffffffffff` are dropped; an address with inlined
//!    functions becomes one entry per function, innermost first, all but the outermost suffixed
//!    ` (inline)`.
//! 5. `ReduceProfile`: a function is counted once per stack, however often it recurses.
//! 6. flat = the stack's first remaining function, cum = every remaining function; rows sorted by
//!    flat (descending; cum with `--cum`) then name, rows with flat = cum = 0 left out, percentages
//!    of the flat total.
//!
//! The rules of steps 2, 4 and 6 are the workspace's charging engine ([`jeprof_dumpfmt::charge`]);
//! under [`ReportOptions::skip`]'s default (not `--keep_alloc_frames`) step 2 also removes Rust's
//! allocator shims and the frames inside the allocator's own objects, whatever they are named.
//!
//! Our own mode adds one step between 4 and 5 ([`ReportOptions::attribution`],
//! [`crate::attribution`]): `--show_from` drops functions toward the root, and flat goes to the
//! first function (from the leaf) that `--hide` does not match, by default the first that is not
//! the standard library's or the allocator's. With `Attribution::default()` (what
//! `--jeprof_names` gives) the report is jeprof's.
//!
//! Figures are `f64` sums of what jeprof computes per entry; jeprof adds them in Perl hash order,
//! which is random, so a figure that lands within a rounding error of an integer (or of a 0.1 MB
//! step) can print one unit apart from one jeprof run to the next.
//!
//! ## Memory
//! [`build_files`] (the command line's text report) never holds a dump: it reads one stack at a
//! time ([`jeprof_dumpfmt::read::read_file_stacks_with`]) and keeps, until the dump's memory map
//! (its last section) says how to name the frames, each stack's distinct addresses as dense
//! indexes and the one figure shown (about 28 bytes a stack of two frames, where a
//! [`Profile`](jeprof_dumpfmt::Profile) takes about 200); then each distinct address is named once,
//! the stacks are added up per function, and what remains is each function's name, once (an address nothing names as the
//! address), and its sums. Its text is written as it is made ([`FunctionTable::write_text`]).
//! Measured on a dump of a million two-frame stacks, 55 MB, with a million distinct addresses
//! nothing names: a peak resident size of 2.2 times the dump, where whole dumps took 18 times.
//! `--collapsed` and flame graphs ([`collapsed`]) still take resolved profiles.
//!
//! ## Layers
//! Bottom to top: [`filters`] and [`lines`] (jeprof's `--ignore`/`--retain`/`--exclude` and
//! `--lines` rules); `model` (the vocabulary: [`Measure`], [`ReportOptions`], [`Report`], [`Row`],
//! [`FunctionName`]); `frames` (which frames of a resolved stack are shown, and as which
//! functions: [`shown_frames`], [`frame_functions`]); `text` (jeprof's number formatting and the
//! `--text` layout: [`format_text`], [`perl_int`], [`unparse`]); `translate` (names interned once,
//! each distinct frame translated once); `aggregate` (the streaming sums: [`build`],
//! [`build_files`], [`FunctionTable`], the diff's pair of reports); `folded` ([`collapsed`],
//! [`flamegraph`]); `allocator` (`--allocator`: the allocator's figures the dumps carry,
//! [`allocator_files`]); `rss` (`--rss`: where the resident memory is, per function,
//! [`rss_file`]). Their items are re-exported here, which is their public path.

pub mod filters;
pub mod lines;

mod aggregate;
mod allocator;
mod folded;
mod frames;
mod model;
mod rss;
mod text;
mod translate;

pub use aggregate::{build, build_dumps, build_files, FunctionTable};
pub(crate) use aggregate::{build_file_pair, PairedSums};
pub use allocator::{allocator_files, AllocatorReport, SeriesChange};
pub use folded::{collapsed, collapsed_files, flamegraph, flamegraph_title, format_collapsed};
pub(crate) use frames::allocator_names_inlined;
#[cfg(feature = "export")]
pub(crate) use frames::frame_class;
pub use frames::{frame_functions, interesting_frames, shown_frames};
pub use model::{FunctionFigures, FunctionName, Measure, Report, ReportOptions, Row};
pub use rss::{rss_file, rss_profile, RssReport, RssRow};
pub use text::{
    format_text, interval_legend, percent, perl_int, plain_figure, prints_perl_overflow, units,
    unparse,
};
