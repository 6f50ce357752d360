//! Fleet merge: unbias each dump, then add.
//!
//! The reader already turns every entry into jeprof's unbiased figures with the dump's own period,
//! so adding `f64`s across dumps is the "unbias, then sum" order that stays right whatever the mix
//! of periods and sizes (`docs/design.md` §2). What makes stacks from different dumps the same
//! stack is each frame's [`Frame::identity`]: its function names where the dump has symbols (so
//! different builds merge by name), else `module+0xoffset` from the dump's own memory map (so
//! different processes merge whatever ASLR did), else the address.
//!
//! # Algebra
//! An [`Accumulator`] is a map from stack identity to [`Counts`]; [`Accumulator::add`] and
//! [`Accumulator::absorb`] add figures and variances key by key. Addition of reals is associative and
//! commutative, so merging in any grouping or order gives the same result up to floating-point
//! reassociation (a relative 1e-12 or so; tested by property tests, which also merge written-out
//! partial merges); the output period is the smallest non-zero period of the inputs, which is
//! associative too. Variances add because the dumps' samples are independent. So a merge of merges
//! is the merge of everything: a fleet can be merged per host or rack, the partial dumps shipped,
//! and those merged (`docs/design.md` §15). Up to the rounding of a heap_v2 dump's integers: a
//! partial written as heap_v2 keeps each stack's figures to the writer's rounding
//! ([`OutputRounding`]), its variances as its figures at its own period imply, and no thread lines.
//!
//! # Streaming
//! [`merge_stream`] reads the dumps' names as it goes ([`expand`]: arguments, directories, lists of
//! any length) and folds each dump in as it is read, then drops it: memory grows with the number of
//! distinct stacks, names and frames, never with the number of dumps. [`merge_files`] is the same
//! merge over a list in memory, bit for bit.
//!
//! # Fast path
//! [`Accumulator::add_dump`] (what [`merge_stream`] uses) folds a parsed dump in without building
//! [`Frame`]s: names and frame identities are interned to ids (stacks are hashed as ids, never as
//! strings), each distinct address of a dump is resolved once, walking the symbol section in its own
//! order (the translation engine of [`crate::symbolize`], which [`resolve`] takes too), and each
//! distinct symbol entry is demangled and cleaned once per merge (cached by its raw names). It
//! applies the same identity rules as [`Frame::identity`] and equals `add(&resolve(..))`
//! (property-tested), for raw dumps as for dumps with a symbol section.
//!
//! # Output
//! [`Accumulator::to_profile`] is the merged dump; [`OutputRounding`] is how its figures become
//! heap_v2's integers ([`OutputRounding::write_options`]).
//!
//! # Labels
//! The merged dump keeps the labels ([`Profile::labels`]: program, build id, host, pid…) on which
//! every input agrees, and names the others in a `# dropped_labels: host,pid` annotation
//! ([`DROPPED_LABELS`]), which a merge of merged dumps carries on: labels merge by intersection
//! and dropped keys by union, both associative, so a tree reduce ends with the same labels.
//!
//! # The allocator's figures
//! The merged dump carries the allocator's figures its inputs carry ([`jeprof_dumpfmt::allocator`]):
//! each process's latest dump, summed over processes, with how many in an `allocator_dumps`
//! annotation; or, when an input had none, an `allocator_lost` annotation saying so, which
//! `report --allocator` quotes.
//!
//! Frames above `0x7fffffffffffffff` (kernel addresses, which jeprof drops from every report) are
//! left out. Per-thread lines and the header thread summaries are not carried over: thread uids mean nothing
//! across processes.

#[cfg(doc)]
use crate::symbolize::{resolve, Frame};
#[cfg(doc)]
use jeprof_dumpfmt::{Counts, Profile};

mod accumulator;
mod allocator_tally;
mod inputs;
mod rounding;
mod stream;

pub use accumulator::{Accumulator, DROPPED_LABELS};
pub use inputs::{count, expand, Input};
pub use rounding::OutputRounding;
pub use stream::{merge_files, merge_stream};
