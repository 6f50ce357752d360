//! # jeprof-dumpfmt: jemalloc `heap_v2` heap profiles, unbiased
//!
//! One in-memory model ([`Profile`]) of a sampled heap profile whose figures are already *unbiased per
//! sample* (the only order that stays right when samples of different sizes are added up, see
//! [`math`]), a [writer](mod@write) whose dumps the legacy Perl `jeprof` reports correctly, a [`read`]er for
//! every dump real jemalloc writes (and ours), [`pprof`] output (what `go tool pprof` and
//! continuous-profiling scrapers read) and [`otlp`] output (OpenTelemetry profiles). Formats are
//! adapters around the one model; [`charge`] is the one charging engine (which frames are the
//! allocator's, which function gets flat) every report and the served page call, [`frames`] its
//! name lists, and [`maps`] reads a dump's memory map.
//!
//! ```
//! use jeprof_dumpfmt::{Estimate, Profile, Stack, WriteOptions};
//!
//! // A stack holding one million 8-byte objects, sampled at R = 1 MiB: ~7.6 samples expected.
//! let period = 1 << 20;
//! let mut profile = Profile::new(period);
//! let mut stack = Stack { frames: vec![0x401234, 0x401500], ..Stack::default() };
//! for _ in 0..8 {
//!     stack.counts.inuse.add(&Estimate::of_sample(8.0, period as f64));
//! }
//! profile.stacks.push(stack);
//!
//! let text = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default()).unwrap();
//! let back = jeprof_dumpfmt::read::parse(text.as_bytes()).unwrap();
//! // What jeprof will compute from the dump is what we wrote, to within the rounding the format allows.
//! let want = profile.totals().inuse.bytes;
//! let got = back.totals().inuse.bytes;
//! assert!((got - want).abs() / want < 1e-3);
//! ```
//!
//! ## Guarantees
//! - **What jeprof prints.** For a dump written with the default [`WriteOptions`] ([`Rounding::Optimal`],
//!   [`HeaderPeriod::Auto`]), the figures jeprof computes per stack (`--inuse_space`, `--inuse_objects`,
//!   and the alloc pair) equal the model's within the integer rounding the format allows. Worst
//!   relative error per stack of at least 2·R, measured (jeprof's computed figures; what it prints
//!   is further truncated to integers):
//!
//!   | input | ours | jemalloc's rounding ([`Rounding::Nearest`]) |
//!   |---|---|---|
//!   | the synthetic fixtures, 62 (stack, figure) pairs (`cargo run -p jeprof-fixtures --bin rounding-report`) | bytes 4.1·10⁻⁷, objects 7.3·10⁻⁸ | bytes 2.9·10⁻², objects 6.0·10⁻² |
//!   | 100,000 arbitrary (merged) stacks with `n_c` ≥ 2 (`cargo run --release -p jeprof-dumpfmt --example rounding_grid`) | 1.0·10⁻⁴ (the search stops there) | 44.7% (`n_c` in [2, 3)) down to 0.024% (`n_c` ≥ 4096) |
//!
//!   Checked against the real jeprof by the conformance tests in `tests/`.
//! - **Reading.** [`read::parse`] computes, per entry, exactly what jeprof's `AdjustSamples` computes
//!   (same floating-point operations). It never panics; malformed input is an [`Error::Malformed`]
//!   naming the line number, the line and what was expected; input that is not a heap_v2 dump is an
//!   [`Error::NotHeapV2`].
//! - **Round trip.** write → read gives back every stack's figures within the bound above (tested on
//!   every fixture and by a property test over generated profiles).
//!
//! ## Limits
//! - jeprof prints objects and `--show_bytes` figures truncated to integers; a stack of one 1 MiB
//!   object at R = 512 KiB really is 1.16 estimated objects, which jeprof prints as 1.
//! - Each dump entry costs jeprof at least about `n·R` bytes, so a stack with less than about 2·R in it
//!   (or a single large sample) can only be written as one entry, with jemalloc's rounding error.
//! - Variances survive a round trip only through our own `# var` lines; for dumps from real jemalloc
//!   they are estimated as if every sample of an entry had the entry's average size.
//!
//! ## Modules, bottom to top
//! Each module uses only modules on the lines above its own (tests aside), so none of them
//! imports another in a circle:
//! - [`error`], [`math`] (the estimator), [`syntax`] (the heap_v2 grammar), [`frames`] and
//!   [`maps`] use no other module.
//! - [`encode`] (the integer encoding jeprof reads back) uses math; [`labels`] uses error and
//!   syntax; [`output`] (atomic files) uses error; [`build_ids`] (the mapped files' build ids a
//!   dump carries) uses none.
//! - [`charge`], the charging engine, uses frames and maps.
//! - [`model`], the one profile, uses error, math and labels (to validate them).
//! - [`allocator`] (the allocator's figures beside a profile, and their reading) uses error and
//!   model.
//! - [`rss`] (where the resident memory is, per site: residency and stranded slab space) uses
//!   allocator, error, math and model.
//! - [`series`] (a series' order and each dump's process) uses labels.
//! - [`scopes`] uses model; [`pprof`] uses error, charge, frames, maps and model; [`otlp`] (OpenTelemetry
//!   profiles) uses error, labels and pprof.
//! - [`read`] and [`write`](mod@write) mirror each other over [`syntax`], section by section: read
//!   uses error, labels, math, model, scopes and syntax; write uses encode, error, math, model,
//!   output, scopes and syntax. Neither uses the other.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allocator;
pub mod build_ids;
pub mod charge;
pub mod encode;
pub mod error;
pub mod frames;
pub mod labels;
pub mod leaks;
pub mod maps;
pub mod math;
pub mod model;
pub mod otlp;
pub mod output;
pub mod pprof;
pub mod read;
pub mod rss;
pub mod scopes;
pub mod series;
pub mod syntax;
pub mod write;

pub use encode::Rounding;
pub use error::Error;
pub use model::{
    Counts, Estimate, Profile, ScopeStack, SourceLine, Stack, SymbolTable, ThreadCounts,
    ThreadSummary,
};
pub use write::{HeaderPeriod, WriteOptions};
