//! The command line's flags: each subcommand's arguments as clap derives them, with their help.
//!
//! In ripgrep's terms this is `defs.rs` and `lowargs.rs` in one: clap's derive makes the declaration
//! of a flag and the field that holds what was parsed one item. What the libraries take is made from
//! these in [`crate::cli::options`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use jeprof_compat::views::base::ThreadChoice;

use crate::cli::help;

#[derive(Parser)]
#[command(
    name = "jeprof-compat",
    version,
    about = "jeprof's heap reports without Perl, fleet merges, pprof output and leak diffs for jemalloc heap_v2 dumps",
    after_help = help::TOP_SHORT,
    after_long_help = help::TOP
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Print jeprof's text report (or folded stacks, or a flame graph) of one or more dumps added up.
    #[command(after_help = help::SHORT, after_long_help = help::REPORT)]
    Report(ReportArgs),
    /// Merge dumps (any processes, builds and sample periods) into one heap_v2 dump or pprof file.
    #[command(after_help = help::SHORT, after_long_help = help::MERGE)]
    Merge(MergeArgs),
    /// Convert dumps to pprof's profile.proto (gzipped).
    #[command(after_help = help::SHORT, after_long_help = help::PPROF)]
    Pprof(PprofArgs),
    /// Convert dumps to OpenTelemetry profiles (an OTLP ExportProfilesServiceRequest, protobuf).
    #[command(after_help = help::SHORT, after_long_help = help::OTLP)]
    Otlp(PprofArgs),
    /// Per-function change from BASE to NEW, with its 95% interval and a flag when it is significant.
    #[command(after_help = help::SHORT, after_long_help = help::DIFF)]
    Diff(DiffArgs),
    /// Leak suspects in one process's series of dumps: the sites still growing, with their rates.
    #[command(after_help = help::SHORT, after_long_help = help::LEAKS)]
    Leaks(LeaksArgs),
    /// Write a raw dump with the names of its frames (a symbol section jeprof reads), from debug
    /// files found by build id, the program, or the mapped libraries.
    #[command(after_help = help::SHORT, after_long_help = help::SYMBOLIZE)]
    Symbolize(SymbolizeArgs),
    /// Write the dumps as rows of unbiased figures (Parquet, schema v1) for any SQL engine.
    #[command(after_help = help::SHORT, after_long_help = help::EXPORT)]
    Export(ExportArgs),
    /// Run SQL over fleet rows (Parquet from `export`), with views by function, leaf, label and time.
    #[cfg(feature = "sql")]
    #[command(after_help = help::SHORT, after_long_help = help::QUERY)]
    Query(QueryArgs),
    /// Run SQL over fleet rows: needs the cargo feature `sql`, which this build was made without.
    #[cfg(not(feature = "sql"))]
    Query(QueryUnavailable),
}

#[derive(Args)]
pub(crate) struct Common {
    /// The program that wrote raw dumps.
    ///
    /// Program that wrote raw (unsymbolized) dumps; mapped libraries are read from their own paths.
    #[arg(long, value_name = "PATH")]
    pub(crate) binary: Option<PathBuf>,
    /// A directory of debug files by build id (repeatable).
    ///
    /// A directory of debug files by GNU build id (`DIR/.build-id/ab/cdef....debug`, as debuginfod
    /// and the distributions keep them; repeat for several, looked in in order).
    ///
    /// A mapping whose build id (from the dump, else from the mapped file or --binary) has a debug
    /// file there is named from it; one that has none is named in a warning and keeps what else
    /// names it.
    #[arg(long = "debug-dir", alias = "debug_dir", value_name = "DIR")]
    pub(crate) debug_dirs: Vec<PathBuf>,
    /// Shorten names exactly as jeprof does.
    ///
    /// Shorten names exactly as jeprof does (strips `<...>` and `(...)`, garbling Rust names).
    #[arg(long = "jeprof_names", alias = "jeprof-names")]
    pub(crate) jeprof_names: bool,
    /// Keep the allocator's frames, as jeprof does.
    ///
    /// Keep Rust allocator frames (`__rust_alloc`, `alloc::alloc::*`, GlobalAlloc impls, the shim's)
    /// and frames inside the allocator's objects whatever their names (libjemalloc, libtcmalloc,
    /// libmimalloc, the preload library, libc's malloc family), which jeprof keeps; jeprof's own
    /// skip list (malloc, jemalloc internals) always applies.
    #[arg(long = "keep_alloc_frames", alias = "keep-alloc-frames")]
    pub(crate) keep_alloc_frames: bool,
    /// Read dumps cut while being written, dropping the cut end.
    ///
    /// Read dumps that were cut while being written (a crash, a full disk, a copy taken too early):
    /// the incomplete last line or record is dropped, with a warning saying what was lost.
    ///
    /// Without it such a dump is an error naming its last line.
    #[arg(long = "allow-truncated", alias = "allow_truncated")]
    pub(crate) allow_truncated: bool,
}

#[derive(Args)]
#[group(multiple = false)]
pub(crate) struct MeasureArgs {
    /// Live bytes (default).
    #[arg(long = "inuse_space", alias = "inuse-space", hide_short_help = true)]
    pub(crate) inuse_space: bool,
    /// Live objects.
    #[arg(long = "inuse_objects", alias = "inuse-objects")]
    pub(crate) inuse_objects: bool,
    /// Bytes allocated since the start (needs prof_accum).
    #[arg(long = "alloc_space", alias = "alloc-space")]
    pub(crate) alloc_space: bool,
    /// Objects allocated since the start (needs prof_accum).
    #[arg(long = "alloc_objects", alias = "alloc-objects")]
    pub(crate) alloc_objects: bool,
}

#[derive(Args)]
pub(crate) struct ViewArgs {
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    /// Print bytes as integers (B) instead of MB with one decimal.
    #[arg(long = "show_bytes", alias = "show-bytes")]
    pub(crate) show_bytes: bool,
    /// Print at most N rows.
    ///
    /// Print at most N rows (jeprof's --text ignores its --nodecount and prints all).
    #[arg(long, value_name = "N")]
    pub(crate) nodecount: Option<usize>,
    /// Only stacks with a frame matching REGEX.
    ///
    /// Only stacks with a frame whose function (or 16-digit address) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub(crate) focus: Option<String>,
}

/// Which function a stack's figure is charged to (`jeprof_compat::attribution`).
#[derive(Args)]
pub(crate) struct AttributionArgs {
    /// Charge flat past the functions matching REGEX.
    ///
    /// Charge flat past the functions matching REGEX, from the leaf, to the first that does not
    /// (they keep their cum).
    ///
    /// Default: the standard library (std::, core::, alloc::, hashbrown:: and their impls for
    /// primitive and generic types) and the allocator (__rust_*, _rjem_*, jeprof_shim::,
    /// tikv_jemallocator::), so flat lands on the program's own code; none with --jeprof_names.
    /// --hide '' hides nothing.
    #[arg(long, value_name = "REGEX")]
    pub(crate) hide: Option<String>,
    /// Drop frames from the root down to the one matching REGEX.
    ///
    /// Drop the functions from the root down to the outermost one matching REGEX (kept, with its
    /// callees), as pprof's -show_from; stacks without a match keep no function.
    #[arg(long = "show_from", alias = "show-from", value_name = "REGEX")]
    pub(crate) show_from: Option<String>,
}

#[derive(Args)]
#[group(multiple = false)]
pub(crate) struct OutputKind {
    /// jeprof's text report (default).
    #[arg(long, hide_short_help = true)]
    pub(crate) text: bool,
    /// Folded stacks `root;...;leaf count`, sorted.
    ///
    /// Folded stacks `root;...;leaf count`, sorted (jeprof prints them in random order).
    #[arg(long)]
    pub(crate) collapsed: bool,
    /// Write a flame graph SVG to OUT.svg.
    #[arg(long, value_name = "OUT.svg")]
    pub(crate) flamegraph: Option<PathBuf>,
    /// Write one self-contained HTML page to OUT.html.
    ///
    /// Write one self-contained HTML page to OUT.html: the in-use flame graph, the top sites with
    /// bytes, objects and 95% intervals (sortable), the allocator's figures, scopes; a series of
    /// one process's dumps adds live bytes over time and the leak suspects (the last dump is the
    /// moment shown).
    #[arg(long, value_name = "OUT.html", conflicts_with_all = ["scope", "by_scope", "allocator"])]
    pub(crate) html: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct ReportArgs {
    /// The dumps to read.
    ///
    /// Dumps to add up; a running process's profile as http://host:port/pprof/heap.
    #[arg(required = true, value_name = "DUMP")]
    pub(crate) dumps: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) output: OutputKind,
    #[command(flatten)]
    pub(crate) view: ViewArgs,
    /// Add each function's 95% confidence interval (flat and cum).
    #[arg(long)]
    pub(crate) interval: bool,
    /// Sort by cum rather than flat (as jeprof's --cum).
    #[arg(long)]
    pub(crate) cum: bool,
    #[command(flatten)]
    pub(crate) attribution: AttributionArgs,
    #[command(flatten)]
    pub(crate) views: JeprofViewArgs,
    /// Report only the scope LABEL's in-use figures.
    ///
    /// Report only the in-use figures of the scope LABEL (dumps of jeprof-shim's scopes).
    #[arg(long, value_name = "LABEL", conflicts_with = "by_scope")]
    pub(crate) scope: Option<String>,
    /// Each scope's in-use total with its 95% interval.
    ///
    /// Print each scope's in-use total with its 95% interval instead of the function table.
    #[arg(long = "by-scope")]
    pub(crate) by_scope: bool,
    /// After the table, the allocator's figures.
    ///
    /// After the table, the allocator's figures the dumps carry (of several dumps of one process
    /// the last, table included, with the change over the series; summed over processes), one per
    /// line as `<name>: <bytes> B`, and what they say: how much of the heap the profile covers,
    /// fragmentation, retained memory, the profiler's share.
    ///
    /// Dumps of jeprof-shim and libjeprof_preload.so carry them; a dump without them is an error.
    #[arg(long, conflicts_with_all = ["collapsed", "flamegraph", "scope", "by_scope"])]
    pub(crate) allocator: bool,
    /// Where the resident memory is, per function, instead of the table.
    ///
    /// Where the resident memory is, per function, instead of the table: in-use, resident (with
    /// its 95% interval), swapped and stranded slab bytes (jemalloc only), then the RSS
    /// reconciled with these parts. One dump of jeprof-shim or libjeprof_preload.so (setting
    /// `rss`, on by default).
    #[arg(long, conflicts_with_all = ["collapsed", "flamegraph", "html", "scope", "by_scope", "allocator"])]
    pub(crate) rss: bool,
    /// With --rss: print JSON instead.
    ///
    /// With --rss: print JSON (an object with a `sites` array and `totals`) instead.
    #[arg(long, requires = "rss")]
    pub(crate) json: bool,
    /// Of each process's dumps, read only its last.
    ///
    /// Of several dumps of one process (same pid and host, by labels or jemalloc's file names),
    /// read only its last in series order (time label, else the file name's sequence number,
    /// else modification time): a fleet merge of periodic dumps, each process once.
    #[arg(long = "latest-per-process", alias = "latest_per_process")]
    pub(crate) latest_per_process: bool,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// jeprof's other views and filters of `report` (`--base`, `--thread`, `--ignore`, `--dot`, ...),
/// carried out by [`jeprof_compat::views`].
#[derive(Args)]
pub(crate) struct JeprofViewArgs {
    /// Subtract this dump's figures (jeprof's --base).
    ///
    /// Subtract this dump's figures, stack by stack (jeprof's --base: a dump of the same process;
    /// a stack only in BASE shows negative).
    #[arg(long, value_name = "BASE")]
    pub(crate) base: Option<PathBuf>,
    /// With --base: a negative stack counts zero.
    ///
    /// With --base: a stack whose figure would be negative counts zero.
    #[arg(long = "drop_negative", alias = "drop-negative")]
    pub(crate) drop_negative: bool,
    /// Report thread N of the first dump, or each with '*'.
    ///
    /// Report thread N of the first dump (the N of its `tN:` lines), or every thread with '*',
    /// one report each, instead of the whole process.
    #[arg(long, value_name = "N|*")]
    pub(crate) thread: Option<ThreadChoice>,
    /// Leave out stacks with a frame matching REGEX.
    ///
    /// Leave out the stacks with a frame whose function, 16-digit address or source line
    /// (file:line) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub(crate) ignore: Option<String>,
    /// Keep only the frames matching REGEX.
    ///
    /// Keep only the frames whose function matches REGEX (a stack left with none is left out).
    #[arg(long, value_name = "REGEX")]
    pub(crate) retain: Option<String>,
    /// Leave out the frames matching REGEX.
    ///
    /// Leave out the frames whose function matches REGEX (a stack left with none is left out).
    #[arg(long, value_name = "REGEX")]
    pub(crate) exclude: Option<String>,
    /// A row per function and source line.
    ///
    /// A row per function and source line (`name file:line`), from the program's DWARF or the
    /// dump's symbol section (where jeprof refuses: it needs a binary). jeprof's
    /// ` (discriminator N)` suffixes are not printed.
    #[arg(long)]
    pub(crate) lines: bool,
    /// Print the call graph in Callgrind's format.
    ///
    /// Print the call graph in Callgrind's format (for callgrind_annotate and KCachegrind), as
    /// jeprof does: `file:line:function` per frame, the line from the program's DWARF or the dump's
    /// symbol section, `??:0` where unknown.
    ///
    /// Names are whole (jeprof cuts a function name at its first space, which garbles Rust names;
    /// --jeprof_names gives its short names).
    #[arg(long, conflicts_with_all = ["text", "collapsed", "flamegraph"])]
    pub(crate) callgrind: bool,
    /// Print the source of functions matching REGEX, per line.
    ///
    /// Print the source of the functions matching REGEX with each line's flat and cumulative
    /// figures, as jeprof does (needs --binary, its DWARF and the source files).
    #[arg(long, value_name = "REGEX", conflicts_with_all = ["text", "collapsed", "flamegraph", "callgrind"])]
    pub(crate) list: Option<String>,
    /// Print the call graph in Graphviz's dot language.
    ///
    /// Print the call graph in Graphviz's dot language, as jeprof does (--nodecount nodes, 80 by
    /// default).
    #[arg(long, conflicts_with_all = ["text", "collapsed", "flamegraph", "callgrind", "list"])]
    pub(crate) dot: bool,
    /// Print (or write) the graph as SVG.
    ///
    /// Print the call graph as SVG: the --dot graph drawn by Graphviz's `dot` (install graphviz).
    #[arg(long, conflicts_with_all = ["text", "collapsed", "flamegraph", "callgrind", "list", "dot"])]
    pub(crate) svg: bool,
    /// --dot/--svg: drop nodes at most this share.
    ///
    /// --dot/--svg: leave out nodes whose cumulative figure is at most this share of the total.
    #[arg(long, value_name = "F", default_value_t = 0.005)]
    pub(crate) nodefraction: f64,
    /// --dot/--svg: drop edges at most this share.
    ///
    /// --dot/--svg: leave out edges (but a node's first) of at most this share of the total.
    #[arg(long, value_name = "F", default_value_t = 0.001)]
    pub(crate) edgefraction: f64,
    /// Seconds to wait for a fetched profile.
    ///
    /// Seconds to wait for each page of a process's profile (DUMP given as
    /// http://host:port/pprof/heap, as jeprof fetches it).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub(crate) timeout: u64,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    /// jemalloc's text format, symbolized (jeprof reads it without a binary).
    #[value(name = "heap_v2")]
    HeapV2,
    /// pprof profile.proto, gzipped.
    Pprof,
}

#[derive(Args)]
pub(crate) struct MergeArgs {
    /// Dumps to merge.
    #[arg(value_name = "DUMP", required_unless_present_any = ["inputs_from", "inputs_dir"])]
    pub(crate) dumps: Vec<PathBuf>,
    /// Also merge the dumps in DIR (repeatable).
    ///
    /// Also merge the dumps in DIR, after the DUMP arguments: its regular files whose names do not
    /// start with `.` (unfinished atomic writes), sorted by name; subdirectories are not entered.
    ///
    /// May be given several times.
    #[arg(long = "inputs-dir", alias = "inputs_dir", value_name = "DIR")]
    pub(crate) inputs_dir: Vec<PathBuf>,
    /// Also merge the dumps FILE lists, one a line.
    ///
    /// Also merge the dumps FILE lists, one path per line (`-`: standard input), after the DUMP
    /// arguments and directories; blank lines and lines starting with `#` are skipped.
    ///
    /// The list is read as the merge goes, so it can name any number of dumps. May be given several
    /// times.
    #[arg(long = "inputs-from", alias = "inputs_from", value_name = "FILE")]
    pub(crate) inputs_from: Vec<PathBuf>,
    /// Where to write the merged profile.
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "heap_v2")]
    pub(crate) format: Format,
    /// Dumps parsed in parallel, and threads encoding the merged dump's figures (default: the
    /// number of cores).
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// How the merged figures become heap_v2's integers.
    ///
    /// How heap_v2 figures become integers, the header period being R, the smallest input period:
    /// `optimal` writes the entries whose jeprof figures are closest to the truth (up to three per
    /// stack); `best` also tries header periods R/2..R/64 (most accurate, can be 10x slower);
    /// `nearest` is jemalloc's own rounding, one entry per stack (fastest, least accurate).
    #[arg(long, value_enum, default_value = "optimal")]
    pub(crate) rounding: RoundingArg,
    /// (--format pprof: which function flat is charged to, as in `report`.)
    #[command(flatten)]
    pub(crate) attribution: AttributionArgs,
    /// A label KEY=VALUE to add (repeatable).
    ///
    /// A label KEY=VALUE for the merged profile (repeat for several): a `# label` line of the
    /// heap_v2 output, a string label on every sample of pprof output.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,
    /// Of each process's dumps, read only its last.
    ///
    /// Of several dumps of one process (same pid and host, by labels or jemalloc's file names),
    /// read only its last in series order (time label, else the file name's sequence number,
    /// else modification time): a fleet merge of periodic dumps, each process once.
    #[arg(long = "latest-per-process", alias = "latest_per_process")]
    pub(crate) latest_per_process: bool,
    #[command(flatten)]
    pub(crate) common: Common,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RoundingArg {
    /// Closest jeprof figures at period R (may write several entries per stack).
    Optimal,
    /// As `optimal`, also choosing the header period among R..R/64.
    Best,
    /// jemalloc's rounding: one entry per stack.
    Nearest,
}

#[derive(Args)]
pub(crate) struct PprofArgs {
    /// Dumps to convert (several are added up).
    #[arg(required = true, value_name = "DUMP")]
    pub(crate) dumps: Vec<PathBuf>,
    /// Where to write the output.
    ///
    /// Where to write the profile: `pprof`'s gzipped profile.proto (OUT.pb.gz), `otlp`'s
    /// protobuf request (OUT.pb).
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) attribution: AttributionArgs,
    /// A label KEY=VALUE to add (repeatable).
    ///
    /// A string label KEY=VALUE on every sample, replacing a dump's own label KEY (repeat for
    /// several); a dump's `# label` lines are labels too.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,
    #[command(flatten)]
    pub(crate) common: Common,
}

#[derive(Args)]
pub(crate) struct SymbolizeArgs {
    /// The dumps to read.
    ///
    /// The dump to symbolize (jeprof's `PROGRAM DUMP` form takes the program first).
    #[arg(required = true, value_name = "DUMP")]
    pub(crate) dumps: Vec<PathBuf>,
    /// Where to write the output.
    ///
    /// Where to write the symbolized dump (heap_v2 with a symbol section).
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) common: Common,
}

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// Dumps to export (ours, jemalloc's, merged ones).
    #[arg(required = true, value_name = "DUMP")]
    pub(crate) dumps: Vec<PathBuf>,
    /// The Parquet file to write.
    #[arg(short, long, value_name = "OUT.parquet")]
    pub(crate) output: PathBuf,
    /// A label KEY=VALUE to add (repeatable).
    ///
    /// A label KEY=VALUE added to every row's labels, replacing a dump's own label KEY (repeat
    /// for several).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,
    /// One row per stack and thread.
    ///
    /// One row per stack and thread where a dump has per-thread lines.
    ///
    /// Their figures add up to the per-thread lines', not to the stack's (each line is unbiased
    /// with its own average size).
    #[arg(long = "per-thread", alias = "per_thread")]
    pub(crate) per_thread: bool,
    /// Dumps read at once (default: the number of cores, at most 4).
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// Of each process's dumps, read only its last.
    ///
    /// Of several dumps of one process (same pid and host, by labels or jemalloc's file names),
    /// read only its last in series order (time label, else the file name's sequence number,
    /// else modification time): a fleet merge of periodic dumps, each process once.
    #[arg(long = "latest-per-process", alias = "latest_per_process")]
    pub(crate) latest_per_process: bool,
    #[command(flatten)]
    pub(crate) common: Common,
}

#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The earlier dump.
    pub(crate) base: PathBuf,
    /// The later dump.
    pub(crate) new: PathBuf,
    #[command(flatten)]
    pub(crate) view: ViewArgs,
    /// Compare cumulative figures instead of flat.
    ///
    /// Compare cumulative figures (a function and its callees) instead of flat ones.
    #[arg(long)]
    pub(crate) cum: bool,
    #[command(flatten)]
    pub(crate) attribution: AttributionArgs,
    #[command(flatten)]
    pub(crate) common: Common,
}

#[derive(Args)]
pub(crate) struct LeaksArgs {
    /// The dumps to read.
    ///
    /// One process's dumps, in any order (ordered by their time labels, else by the sequence
    /// numbers of jemalloc's file names, else by modification time).
    #[arg(required = true, value_name = "DUMP")]
    pub(crate) dumps: Vec<PathBuf>,
    /// A site per stack (root;...;leaf) rather than per user frame.
    #[arg(long = "per-stack", alias = "per_stack")]
    pub(crate) per_stack: bool,
    /// False discovery rate over all sites (Benjamini-Hochberg).
    #[arg(long, value_name = "RATE", default_value_t = 0.05)]
    pub(crate) fdr: f64,
    /// The recent share of the series that must keep growing.
    ///
    /// The recent part of the series that must keep growing, as a fraction of its time span.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    pub(crate) window: f64,
    /// Steps of the window the floor must rise over.
    ///
    /// How many consecutive steps of the window the floor must rise over.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) steps: usize,
    /// Read at most N dumps, spread over the series.
    ///
    /// Read at most N dumps, spread evenly over the series' time span.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub(crate) points: usize,
    /// The process's heap limit (8G: powers of 1024).
    ///
    /// The process's heap limit (bytes, or with k, M, G: powers of 1024): adds when it is reached.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) limit: Option<f64>,
    /// Print JSON instead of the table.
    ///
    /// Print JSON (an object with a `suspects` array) instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print (or write) the graph as SVG.
    ///
    /// Also write live bytes over time of the top sites, suspects marked, to OUT.svg.
    #[arg(long, value_name = "OUT.svg")]
    pub(crate) svg: Option<PathBuf>,
    /// Only stacks with a frame matching REGEX.
    ///
    /// Only stacks with a frame whose function (or 16-digit address) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub(crate) focus: Option<String>,
    #[command(flatten)]
    pub(crate) attribution: AttributionArgs,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// A byte count: a number, optionally with a decimal fraction, and a unit: k, M, G, T or KiB, MiB,
/// GiB, TiB (also Ki, Mi, Gi, Ti), all powers of 1024, as the shim's settings and jemalloc take
/// them and as jeprof's `MB` means. `kB`, `MB`, `GB` are refused: they might be meant as powers
/// of 1000.
fn parse_bytes(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "k" | "K" | "Ki" | "KiB" => 10,
        "M" | "Mi" | "MiB" => 20,
        "G" | "Gi" | "GiB" => 30,
        "T" | "Ti" | "TiB" => 40,
        other => {
            return Err(format!(
                "unknown unit {other:?}: k, M, G, T or KiB, MiB, GiB, TiB (powers of 1024)"
            ))
        }
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() => Ok(n * (1u64 << shift) as f64),
        _ => Err(format!(
            "{text:?} is not a positive byte count such as 8G (8 GiB) or 2147483648"
        )),
    }
}

/// `query` in a build without the SQL engine: takes whatever was given, to say what to do instead.
#[cfg(not(feature = "sql"))]
#[derive(Args)]
pub(crate) struct QueryUnavailable {
    /// The SQL and its files (not run: this build has no SQL engine).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) given: Vec<std::ffi::OsString>,
}

#[cfg(feature = "sql")]
#[derive(Args)]
pub(crate) struct QueryArgs {
    /// One SQL statement over table `rows` and the views.
    ///
    /// One SQL statement over table `rows` and the views (none with --print-sql).
    #[arg(required_unless_present = "print_sql")]
    pub(crate) sql: Option<String>,
    /// Parquet files from `export`, or directories of them.
    ///
    /// Parquet files from `export`, directories of them, or patterns such as 'fleet/*.parquet'
    /// (with --print-sql, also URLs such as s3://bucket/fleet/).
    #[arg(required_unless_present = "print_sql", value_name = "FILES")]
    pub(crate) files: Vec<PathBuf>,
    /// Print, instead of running anything, the statements that define `rows` over FILES and the
    /// views in ENGINE's SQL (clickhouse, duckdb, spark, datafusion).
    #[arg(long, value_name = "ENGINE")]
    pub(crate) print_sql: Option<String>,
    /// Print CSV (header line, full precision) instead of a table.
    #[arg(long)]
    pub(crate) csv: bool,
    /// Print byte columns as whole bytes rather than MB.
    #[arg(long)]
    pub(crate) raw: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap wraps the help at the terminal's width: at 80 columns every example line of
    /// [`crate::cli::help`] prints whole, and no line of any help is wider (clap's usage line
    /// aside, which it never wraps).
    #[test]
    fn help_at_80_columns_prints_every_example_line_whole() {
        let mut top = Cli::command();
        top.build();
        let commands = std::iter::once(top.clone()).chain(top.get_subcommands().cloned());
        for command in commands {
            let name = command.get_name().to_string();
            let after = command
                .get_after_long_help()
                .or(command.get_after_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            let help = command.term_width(80).render_long_help().to_string();
            let lines: Vec<&str> = help.lines().collect();
            for line in lines.iter().filter(|l| !l.starts_with("Usage:")) {
                assert!(
                    line.chars().count() <= 80,
                    "{name}: {line:?} is wider than 80 columns"
                );
            }
            let examples = after.split("\n\n").next().unwrap_or("");
            for example in examples.lines().skip(1) {
                assert!(
                    lines.contains(&example),
                    "{name}: {example:?} is not printed whole:\n{help}"
                );
            }
        }
    }
}
