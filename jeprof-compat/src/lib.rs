//! # jeprof-compat: jeprof's reports without Perl, a fleet merge that unbiases before it sums
//!
//! A library (and the `jeprof-compat` binary, a thin command line over it) for jemalloc `heap_v2`
//! heap profiles. The binary parses arguments and prints; what it reads, how, and what it computes
//! are decided here.
//!
//! ## Modules
//! Bottom to top: each module uses only modules listed before it, so there is no import cycle.
//! Which siblings each one uses is in the README's module map, written from the code by the
//! workspace's `module_layers` test.
//! - [`Error`], the one error type; `hash`, the hasher of every table; [`names`]: demangling,
//!   jeprof's name shortening and its skip lists; [`maps`]: the memory map (from
//!   `jeprof-dumpfmt`).
//! - [`attribution`]: which function a stack's figure is charged to (`--hide`,
//!   `--show_from`; by default the first that is not Rust's standard library's or the
//!   allocator's). Its rules, and which frames are the allocator's (by name, and in the project's
//!   own views by the object a frame lies in), are the workspace's one charging engine,
//!   [`jeprof_dumpfmt::charge`], which the page the shim serves calls too.
//! - [`input`]: how dumps are read: [`ReadPolicy`] (strict or accepting cut dumps),
//!   [`read_dump`], [`read_dump_stacks`] (one stack at a time), [`parse_all`], and a dump's memory
//!   map, parsed once.
//! - [`symbolize`]: names for a dump's addresses (its symbol section, else the
//!   binaries its memory map names, or their debug files by build id), through one translation engine that names each distinct
//!   address of a dump once, which [`resolve`], the merge and the text report all take.
//! - [`binary`]: `--binary` checked against the dumps, and jeprof's
//!   `PROGRAM DUMP...` form.
//! - [`named_input`]: whole dumps read and resolved ([`load()`],
//!   [`load_all`], [`load_bytes`]).
//! - [`named_dump`]: a raw dump given the symbol section of what
//!   names its frames (`symbolize`: debug files by build id, `--binary`, the mapped libraries).
//! - [`report`]: jeprof's `--text`
//!   report with the same numbers as the Perl script (same per-entry unbiasing, allocator frames
//!   removed the same way, recursion counted once per stack, same sort and formatting;
//!   [`report::build_files`] folds dump files as they are read), folded stacks (`--collapsed`,
//!   [`report::collapsed_files`]) and flame graphs (inferno), per-function 95% confidence
//!   intervals, and the rules every report shares: [`report::filters`] (`--ignore`, `--retain`,
//!   `--exclude`), [`report::lines`] (`--lines`).
//! - [`views`]: jeprof's `--base`, `--drop_negative`, `--thread`
//!   ([`views::base`]), `--callgrind`, `--list`, `--dot` and fetched profiles.
//! - The subcommands' libraries:
//!   - [`merge`]: any number of dumps, from different
//!     processes (addresses normalised to module + file offset through each dump's memory map),
//!     different builds (merged by function name where symbols exist) and different sample
//!     periods, added up after each is unbiased ([`merge::merge_stream`] over any number of
//!     dumps, read as they come), and how the result's figures become integers
//!     ([`merge::OutputRounding`]);
//!   - [`diff`]: per-function change between two dumps, with its
//!     interval ([`diff::compare_files`]);
//!   - [`pprof`]: `profile.proto` output;
//!   - [`otlp`]: OpenTelemetry profiles, pprof's message re-indexed;
//!   - [`export`]: dumps as rows of
//!     unbiased figures (schema v1, Parquet), which any SQL engine adds up correctly
//!     ([`export::export_files`]; cargo feature `export`, on by default through `cli`); `query`
//!     (cargo feature `sql`): SQL over those rows
//!     in-process, with named views by function, leaf, label and hour and their intervals;
//!   - [`scopes`]: reports of one scope, and per-scope totals, from dumps that carry
//!     scopes;
//!   - [`page`]: `report --html`, the page of `jeprof-page`
//!     from dumps, every figure the text report's.
//!
//! The crate root re-exports what most callers take: [`ReadPolicy`], [`read_dump`],
//! [`read_dump_stacks`], [`parse_all`] (from [`input`]), [`load()`], [`load_all`], [`load_bytes`]
//! (from [`named_input`]), [`resolve`], [`ResolvedProfile`], [`SymbolizeOptions`] (from
//! [`symbolize`]) and [`Accumulator`] (from [`merge`]); [`views::filters`] and [`views::lines`] are
//! [`report::filters`] and [`report::lines`]. Nothing in the library imports the crate root.
//!
//! ## Errors
//! Every fallible function returns [`Error`], whose text names the file (and the line) at fault,
//! except [`read_dump`] and [`read_dump_stacks`]: they are [`jeprof_dumpfmt::read`] under a
//! [`ReadPolicy`], and return its [`jeprof_dumpfmt::Error`] (which [`Error::Dump`] wraps).
//! Functions that can fail only as the caller's [`std::io::Write`] fails return
//! [`std::io::Result`], as that writer does.
//!
//! ## Example
//! ```
//! use jeprof_compat::{load_bytes, report, symbolize::SymbolizeOptions};
//!
//! let dump = "--- symbol\nbinary=prog\n0x40113f leaf_alloc\n0x401149 main\n---\n--- heap\n\
//!             heap_v2/524288\n  t*: 1: 262144 [0: 0]\n@ 0x40113f 0x40114a\n  t*: 1: 262144 [0: 0]\n\
//!             MAPPED_LIBRARIES:\n";
//! let profile = load_bytes(dump.as_bytes(), "dump", &SymbolizeOptions::default()).unwrap();
//! let options = report::ReportOptions { show_bytes: true, ..Default::default() };
//! let text = report::format_text(&report::build(&[profile], &options), &options);
//! assert_eq!(text.lines().next(), Some("Total: 666237 B"));
//! assert!(text.contains("666237 100.0% 100.0%   666237 100.0% leaf_alloc"));
//! ```
//!
//! ## Guarantees and limits
//! - Figures are the `f64` sums of what jeprof computes per entry ([`jeprof_dumpfmt::read`]); jeprof
//!   adds the same numbers in a random (Perl hash) order, so a figure within a rounding step of a
//!   printed boundary may differ by one unit in the last printed digit between jeprof runs, and from
//!   ours.
//! - Names: Rust symbols are demangled cleanly ([`names::NameStyle::Clean`]) where jeprof mangles
//!   them (`<A as B>::alloc` becomes `::alloc`); [`names::NameStyle::Jeprof`] reproduces jeprof's
//!   names. Rust allocator shims are removed too unless asked not to ([`names::SkipRules`]).
//! - Charging ([`jeprof_dumpfmt::charge`]): [`report::ReportOptions::attribution`] defaults to
//!   jeprof's (the leaf); the command line's own mode uses
//!   [`attribution::Attribution::user_code`] and removes, besides jeprof's list, Rust's allocator
//!   shims and every frame inside the allocator's own objects (`libjemalloc*`, a preloaded
//!   tcmalloc or mimalloc, `libjeprof_preload.so`, libc's malloc family) whatever it is named
//!   ([`names::SkipRules`]); `--jeprof_names --keep_alloc_frames` gives jeprof's report, by
//!   jeprof's name-only rule, byte for byte (goldens).
//! - Memory: the text report ([`report::build_files`]) and the diff ([`diff::compare_files`]) read
//!   dumps one stack at a time and keep what they add up, never a dump's stacks: `tests/memory.rs`
//!   holds the growth of their peak resident size to 3 bytes per byte of dump, between a dump and
//!   one ten times its size (half a million stacks) in the same run. A merge ([`merge::merge_stream`]) holds its result plus a
//!   few chunks of dumps' figures and one dump per worker, whatever the number of dumps (the list
//!   of dumps is read as it goes): `tests/merge_memory.rs` holds 4 times as many dumps to the same
//!   peak. Folded stacks, flame graphs,
//!   pprof output and the views of [`views`] (`--base`, `--thread`, `--callgrind`, `--list`,
//!   `--dot`, fetched profiles) resolve whole dumps first, and take a multiple of their size.
//! - A merge is reproducible bit for bit, whatever the number of workers.
//! - Several symbolized dumps are symbolized each with its own symbol section (jeprof merges the
//!   sections, the last file winning an address), so dumps of different builds stay right.
//! - Input never makes the library panic: the fuzz targets (`fuzz/`) and `tests/fuzz_corpus.rs`
//!   hold it to that.
//! - Not reproduced: `--addresses`/`--files` granularity, binutils' ` (discriminator N)`
//!   suffixes at `--lines` and `--list` ([`report::lines`]), `--list` of shared libraries,
//!   jeprof's SVG rewriting for its web viewer, jeprof's `Callback::Run` renaming and its nm `<address>` disambiguation of
//!   overloaded short names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub(crate) mod hash;
pub use jeprof_dumpfmt::maps;
pub mod names;

pub mod attribution;
pub mod input;
pub mod symbolize;

pub mod binary;

pub mod named_dump;
pub mod named_input;

pub mod report;
pub mod views;

pub mod diff;
#[cfg(feature = "export")]
pub mod export;
pub mod leaks;
pub mod merge;
pub mod otlp;
pub mod page;
pub mod pprof;
#[cfg(feature = "sql")]
pub mod query;
pub mod scopes;
pub mod sql_views;

// Public only for the fuzz crate (`fuzz/`, a separate package) and `tests/fuzz_corpus.rs`, which
// run its bodies; not part of the API.
#[doc(hidden)]
pub mod fuzzing;

pub use error::Error;
pub use input::{parse_all, read_dump, read_dump_stacks, ReadPolicy};
pub use merge::Accumulator;
pub use named_input::{load, load_all, load_bytes};
pub use symbolize::{resolve, ResolvedProfile, SymbolizeOptions};
