//! `jeprof-compat`: jeprof's heap reports without Perl, fleet merges, pprof output and leak diffs
//! for jemalloc `heap_v2` dumps. A thin command line over the `jeprof_compat` library.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use jeprof_compat::attribution::Attribution;
use jeprof_compat::merge::{self, OutputRounding};
use jeprof_compat::names::{NameStyle, SkipRules};
use jeprof_compat::report::{self, Measure, ReportOptions};
use jeprof_compat::{binary, diff, export, pprof, ReadPolicy, SymbolizeOptions};
use jeprof_dumpfmt::output::AtomicFile;
use jeprof_dumpfmt::read::ReadOptions;

mod cli_views;

/// jemalloc: the merge's many short-lived names and frame lists cost about half as much as with the
/// system allocator.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "jeprof-compat",
    version,
    about = "jeprof's heap reports without Perl, fleet merges, pprof output and leak diffs for jemalloc heap_v2 dumps",
    after_help = "\
Examples:
  jeprof-compat report --text --show_bytes app.1234.0.f.heap      # like `jeprof --text --show_bytes`
  jeprof-compat report --binary ./app app.heap                    # raw dump: symbolize through its maps
  jeprof-compat report -text ./app app.heap                       # jeprof's own way of saying the same
  jeprof-compat report --interval --focus 'cache::' a.heap b.heap # several dumps add up; 95% intervals
  jeprof-compat report --flamegraph heap.svg app.heap
  jeprof-compat merge -o fleet.heap replica-*.heap                # unbias, then sum; jeprof reads fleet.heap
  jeprof-compat pprof -o app.pb.gz app.heap && go tool pprof -top app.pb.gz
  jeprof-compat diff before.heap after.heap                       # what grew, and is it more than noise?
  jeprof-compat export -o fleet.parquet /dumps/*.heap             # rows for DuckDB, Spark, ClickHouse...

Exit status: 0 on success (also when the reader of stdout goes away), 2 on bad input or usage."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print jeprof's text report (or folded stacks, or a flame graph) of one or more dumps added up.
    #[command(after_help = "\
Examples:
  jeprof-compat report --show_bytes dump.heap
      Total: 2161886 B
       2161886 100.0% 100.0%  2161886 100.0% leaf_alloc
             0   0.0% 100.0%  2161886 100.0% main
  jeprof-compat report --inuse_objects --interval dump.heap
  jeprof-compat report --collapsed dump.heap | sort
  jeprof-compat report --flamegraph out.svg --focus '^my_crate::' dump.heap

Columns (as jeprof): flat, flat%, running sum%, cum, cum%, function. flat: allocated in the function \
itself; cum: in it or in anything it called; a function is counted once per stack. With --interval two \
columns give the 95% confidence interval of flat and cum (the variances of the stacks involved added up; \
a function in several stacks gets the sum of their variances, since stacks are independent samples).

Flat goes to the program's own code: walking a stack from the leaf, functions of Rust's standard \
library and of the allocator are passed over (they keep their cum) and flat goes to the first \
function that is not theirs. --hide REGEX sets the list, --hide '' or --jeprof_names charge flat \
as jeprof does; --cum sorts by cum.

jeprof's form `report PROGRAM DUMP...` (a program first) is `report --binary PROGRAM DUMP...`; \
options take one dash or two (-text, --text), as in jeprof.")]
    Report(ReportArgs),
    /// Merge dumps (any processes, builds and sample periods) into one heap_v2 dump or pprof file.
    #[command(after_help = "\
Examples:
  jeprof-compat merge -o fleet.heap /dumps/*.heap && jeprof --text fleet.heap
  jeprof-compat merge -o fleet.heap --inputs-dir /dumps/        # a directory's dumps
  find /dumps -name '*.heap' | jeprof-compat merge -o fleet.heap --inputs-from -
  jeprof-compat merge --format pprof -o fleet.pb.gz --jobs 2 /dumps/*.heap

Each dump is unbiased with its own period, then figures are added. Frames merge by function name where \
the dump carries symbols, else by module + file offset through the dump's memory map (so ASLR does not \
matter), else by address. The output is a symbolized heap_v2 dump (synthetic addresses, a symbol \
section) whose period is the smallest of the inputs; `jeprof --text OUT` reports it without a binary. \
Labels every input agrees on are kept; the others are named in a `# dropped_labels:` line.

Any number of dumps: each is read, added and dropped, and lists are read as the merge goes, so memory \
follows the distinct stacks, not the number of dumps. A bad dump stops the merge (exit 2, its file \
and line, nothing written).

Merging at scale: merge per host or rack, ship the partial merges, merge the partials. Unbiased \
figures of separate dumps add, and so do their variances; a merged dump keeps both, its period and \
its frame names, so the merge of partials equals the merge of all the dumps (figures within \
heap_v2's integer rounding at each level).")]
    Merge(MergeArgs),
    /// Convert dumps to pprof's profile.proto (gzipped).
    #[command(after_help = "\
Example:
  jeprof-compat pprof -o app.pb.gz app.heap && go tool pprof -top -sample_index=inuse_space app.pb.gz

Sample types: inuse_objects/count, inuse_space/bytes, alloc_objects/count, alloc_space/bytes; values are \
the unbiased estimates rounded to integers; period = the sample period.")]
    Pprof(PprofArgs),
    /// Per-function change from BASE to NEW, with its 95% interval and a flag when it is significant.
    #[command(after_help = "\
Example:
  jeprof-compat diff --show_bytes before.heap after.heap
      Total: base 52428800 B, new 73400320 B, change +20971520 ± 3123456 B (significant)
         change      ±95%      base       new sig function
      +20971520   3100000  10485760  31457280   * my_crate::cache::insert

A change is flagged (*) when its 95% interval excludes zero. The two sides are treated as independent, \
which overstates the noise for two dumps of one process: flagged changes are real.")]
    Diff(DiffArgs),
    /// Write the dumps as rows of unbiased figures (Parquet, schema v1) for any SQL engine.
    #[command(after_help = "\
Examples:
  jeprof-compat export -o fleet.parquet /dumps/*.heap
  jeprof-compat export --label region=eu-west-1 --label env=prod -o day.parquet *.heap
  duckdb -c \"SELECT user_frame, SUM(inuse_bytes) AS bytes, 1.96 * SQRT(SUM(inuse_bytes_var)) AS ci95
              FROM 'fleet.parquet' GROUP BY user_frame ORDER BY bytes DESC LIMIT 20\"

One row per (dump, stack): figures are already unbiased with the dump's own period, so a plain SUM \
over any dumps is right, and SUM of a *_var column is the variance of that sum. Columns (schema v1, \
docs/design.md §13): schema_version, dump, pid, time, build_id, binary, labels (map), sample_period, \
thread, frames (leaf first, allocator frames removed), locations (module+0xoffset), addresses, leaf, \
user_frame (where reports charge flat), inuse_objects, inuse_bytes, alloc_objects, alloc_bytes and \
their *_var. On any error no output file is written.")]
    Export(ExportArgs),
    /// Run SQL over fleet rows (Parquet from `export`), with views by function, leaf, label and time.
    #[cfg(feature = "sql")]
    #[command(after_help = "\
Examples:
  jeprof-compat query 'SELECT * FROM by_function ORDER BY inuse_bytes DESC LIMIT 10' fleet/
  jeprof-compat query --csv 'SELECT * FROM by_label' 'fleet/*.parquet' > by_label.csv
  jeprof-compat query \"SELECT build_id, SUM(inuse_bytes) AS inuse_bytes FROM rows \\
      WHERE labels['service'] = 'api' GROUP BY build_id\" fleet/

The rows are table `rows`, one row per (dump, stack), already unbiased: a plain SUM over any grouping \
is right, and SUM of a column's `_var` is its variance. Views (each with inuse_bytes, inuse_objects, \
alloc_bytes, alloc_objects, a 95% interval `<column>_lo`..`<column>_hi` from the summed variances, \
and `dumps`): by_function (flat, by each row's user_frame), by_leaf, by_label (label, value), \
over_time (hour, UTC). The same SQL runs in DuckDB over the same files (see the README).

Bytes print in MB as jeprof's reports do (--raw for whole bytes); --csv prints every value in full.")]
    Query(QueryArgs),
    /// Run SQL over fleet rows: needs the cargo feature `sql`, which this build was made without.
    #[cfg(not(feature = "sql"))]
    Query(QueryUnavailable),
}

#[derive(Args)]
struct Common {
    /// Program that wrote raw (unsymbolized) dumps; mapped libraries are read from their own paths.
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
    /// Shorten names exactly as jeprof does (strips `<...>` and `(...)`, garbling Rust names).
    #[arg(long = "jeprof_names", alias = "jeprof-names")]
    jeprof_names: bool,
    /// Keep Rust allocator frames (`__rust_alloc`, `alloc::alloc::*`, GlobalAlloc impls, the shim's),
    /// which jeprof keeps; jeprof's own skip list (malloc, jemalloc internals) always applies.
    #[arg(long = "keep_alloc_frames", alias = "keep-alloc-frames")]
    keep_alloc_frames: bool,
    /// Read dumps that were cut while being written (a crash, a full disk, a copy taken too early):
    /// the incomplete last line or record is dropped, with a warning saying what was lost.
    /// Without it such a dump is an error naming its last line.
    #[arg(long = "allow-truncated", alias = "allow_truncated")]
    allow_truncated: bool,
}

impl Common {
    fn symbolize(&self) -> SymbolizeOptions {
        SymbolizeOptions {
            binary: self.binary.clone(),
            style: if self.jeprof_names {
                NameStyle::Jeprof
            } else {
                NameStyle::Clean
            },
        }
    }

    fn read_policy(&self) -> ReadPolicy<'static> {
        ReadPolicy {
            options: ReadOptions {
                allow_truncated: self.allow_truncated,
            },
            on_truncated: &|path, truncation| {
                warn(&format!("{}: {truncation}", path.display()));
            },
        }
    }

    fn skip(&self) -> SkipRules {
        SkipRules {
            rust_allocator_frames: !self.keep_alloc_frames,
        }
    }
}

#[derive(Args)]
#[group(multiple = false)]
struct MeasureArgs {
    /// Live bytes (default).
    #[arg(long = "inuse_space", alias = "inuse-space")]
    inuse_space: bool,
    /// Live objects.
    #[arg(long = "inuse_objects", alias = "inuse-objects")]
    inuse_objects: bool,
    /// Bytes allocated since the start (needs prof_accum).
    #[arg(long = "alloc_space", alias = "alloc-space")]
    alloc_space: bool,
    /// Objects allocated since the start (needs prof_accum).
    #[arg(long = "alloc_objects", alias = "alloc-objects")]
    alloc_objects: bool,
}

impl MeasureArgs {
    fn measure(&self) -> Measure {
        if self.inuse_objects {
            Measure::InuseObjects
        } else if self.alloc_space {
            Measure::AllocSpace
        } else if self.alloc_objects {
            Measure::AllocObjects
        } else {
            Measure::InuseSpace
        }
    }
}

#[derive(Args)]
struct ViewArgs {
    #[command(flatten)]
    measure: MeasureArgs,
    /// Print bytes as integers (B) instead of MB with one decimal.
    #[arg(long = "show_bytes", alias = "show-bytes")]
    show_bytes: bool,
    /// Print at most N rows (jeprof's --text ignores its --nodecount and prints all).
    #[arg(long, value_name = "N")]
    nodecount: Option<usize>,
    /// Only stacks with a frame whose function (or 16-digit address) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    focus: Option<String>,
}

/// Which function a stack's figure is charged to (`jeprof_compat::attribution`).
#[derive(Args)]
struct AttributionArgs {
    /// Charge flat past the functions matching REGEX, from the leaf, to the first that does not
    /// (they keep their cum). Default: the standard library (std::, core::, alloc::, hashbrown::
    /// and their impls for primitive and generic types) and the allocator (__rust_*, _rjem_*,
    /// jeprof_shim::, tikv_jemallocator::), so flat lands on the program's own code; none with
    /// --jeprof_names. --hide '' hides nothing.
    #[arg(long, value_name = "REGEX")]
    hide: Option<String>,
    /// Drop the functions from the root down to the outermost one matching REGEX (kept, with its
    /// callees), as pprof's -show_from; stacks without a match keep no function.
    #[arg(long = "show_from", alias = "show-from", value_name = "REGEX")]
    show_from: Option<String>,
}

impl AttributionArgs {
    fn attribution(&self, common: &Common) -> anyhow::Result<Attribution> {
        let regex = |option: &str, re: &str| {
            regex::Regex::new(re).with_context(|| format!("{option} {re:?} is not a valid regex"))
        };
        let hide = match self.hide.as_deref() {
            None if common.jeprof_names => None,
            None => Attribution::user_code().hide,
            Some("") => None,
            Some(re) => Some(regex("--hide", re)?),
        };
        let show_from = match self.show_from.as_deref() {
            None | Some("") => None,
            Some(re) => Some(regex("--show_from", re)?),
        };
        Ok(Attribution { hide, show_from })
    }
}

#[derive(Args)]
#[group(multiple = false)]
struct OutputKind {
    /// jeprof's text report (default).
    #[arg(long)]
    text: bool,
    /// Folded stacks `root;...;leaf count`, sorted (jeprof prints them in random order).
    #[arg(long)]
    collapsed: bool,
    /// Write a flame graph SVG to OUT.svg.
    #[arg(long, value_name = "OUT.svg")]
    flamegraph: Option<PathBuf>,
}

#[derive(Args)]
struct ReportArgs {
    /// Dumps to add up; a running process's profile as http://host:port/pprof/heap.
    #[arg(required = true, value_name = "DUMP")]
    dumps: Vec<PathBuf>,
    #[command(flatten)]
    output: OutputKind,
    #[command(flatten)]
    view: ViewArgs,
    /// Add each function's 95% confidence interval (flat and cum).
    #[arg(long)]
    interval: bool,
    /// Sort by cum rather than flat (as jeprof's --cum).
    #[arg(long)]
    cum: bool,
    #[command(flatten)]
    attribution: AttributionArgs,
    #[command(flatten)]
    views: cli_views::JeprofViewArgs,
    /// Report only the in-use figures of the scope LABEL (dumps of jeprof-shim's scopes).
    #[arg(long, value_name = "LABEL", conflicts_with = "by_scope")]
    scope: Option<String>,
    /// Print each scope's in-use total with its 95% interval instead of the function table.
    #[arg(long = "by-scope")]
    by_scope: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// jemalloc's text format, symbolized (jeprof reads it without a binary).
    #[value(name = "heap_v2")]
    HeapV2,
    /// pprof profile.proto, gzipped.
    Pprof,
}

#[derive(Args)]
struct MergeArgs {
    /// Dumps to merge.
    #[arg(value_name = "DUMP", required_unless_present_any = ["inputs_from", "inputs_dir"])]
    dumps: Vec<PathBuf>,
    /// Also merge the dumps in DIR, after the DUMP arguments: its regular files whose names do not
    /// start with `.` (unfinished atomic writes), sorted by name; subdirectories are not entered.
    /// May be given several times.
    #[arg(long = "inputs-dir", alias = "inputs_dir", value_name = "DIR")]
    inputs_dir: Vec<PathBuf>,
    /// Also merge the dumps FILE lists, one path per line (`-`: standard input), after the DUMP
    /// arguments and directories; blank lines and lines starting with `#` are skipped. The list is read as the
    /// merge goes, so it can name any number of dumps. May be given several times.
    #[arg(long = "inputs-from", alias = "inputs_from", value_name = "FILE")]
    inputs_from: Vec<PathBuf>,
    /// Where to write the merged profile.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "heap_v2")]
    format: Format,
    /// Dumps parsed in parallel (default: the number of cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// How heap_v2 figures become integers, the header period being R, the smallest input period:
    /// `optimal` writes the entries whose jeprof figures are closest to the truth (up to three per
    /// stack); `best` also tries header periods R/2..R/64 (most accurate, can be 10x slower);
    /// `nearest` is jemalloc's own rounding, one entry per stack (fastest, least accurate).
    #[arg(long, value_enum, default_value = "optimal")]
    rounding: RoundingArg,
    /// (--format pprof: which function flat is charged to, as in `report`.)
    #[command(flatten)]
    attribution: AttributionArgs,
    /// A label KEY=VALUE for the merged profile (repeat for several): a `# label` line of the
    /// heap_v2 output, a string label on every sample of pprof output.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Clone, Copy, ValueEnum)]
enum RoundingArg {
    /// Closest jeprof figures at period R (may write several entries per stack).
    Optimal,
    /// As `optimal`, also choosing the header period among R..R/64.
    Best,
    /// jemalloc's rounding: one entry per stack.
    Nearest,
}

impl RoundingArg {
    fn output_rounding(self) -> OutputRounding {
        match self {
            RoundingArg::Optimal => OutputRounding::Optimal,
            RoundingArg::Best => OutputRounding::Best,
            RoundingArg::Nearest => OutputRounding::Nearest,
        }
    }
}

#[derive(Args)]
struct PprofArgs {
    /// Dumps to convert (several are added up).
    #[arg(required = true, value_name = "DUMP")]
    dumps: Vec<PathBuf>,
    /// Where to write the gzipped profile.proto.
    #[arg(short, long, value_name = "OUT.pb.gz")]
    output: PathBuf,
    #[command(flatten)]
    attribution: AttributionArgs,
    /// A string label KEY=VALUE on every sample, replacing a dump's own label KEY (repeat for
    /// several); a dump's `# label` lines are labels too.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct ExportArgs {
    /// Dumps to export (ours, jemalloc's, merged ones).
    #[arg(required = true, value_name = "DUMP")]
    dumps: Vec<PathBuf>,
    /// The Parquet file to write.
    #[arg(short, long, value_name = "OUT.parquet")]
    output: PathBuf,
    /// A label KEY=VALUE added to every row's labels, replacing a dump's own label KEY (repeat
    /// for several).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// One row per stack and thread where a dump has per-thread lines. Their figures add up to
    /// the per-thread lines', not to the stack's (each line is unbiased with its own average size).
    #[arg(long = "per-thread", alias = "per_thread")]
    per_thread: bool,
    /// Dumps read at once (default: the number of cores, at most 4).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct DiffArgs {
    /// The earlier dump.
    base: PathBuf,
    /// The later dump.
    new: PathBuf,
    #[command(flatten)]
    view: ViewArgs,
    /// Compare cumulative figures (a function and its callees) instead of flat ones.
    #[arg(long)]
    cum: bool,
    #[command(flatten)]
    attribution: AttributionArgs,
    #[command(flatten)]
    common: Common,
}

/// `query` in a build without the SQL engine: takes whatever was given, to say what to do instead.
#[cfg(not(feature = "sql"))]
#[derive(Args)]
struct QueryUnavailable {
    /// The SQL and its files (not run: this build has no SQL engine).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    given: Vec<std::ffi::OsString>,
}

#[cfg(feature = "sql")]
#[derive(Args)]
struct QueryArgs {
    /// One SQL statement over table `rows` and the views.
    sql: String,
    /// Parquet files from `export`, directories of them, or patterns such as 'fleet/*.parquet'.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Print CSV (header line, full precision) instead of a table.
    #[arg(long)]
    csv: bool,
    /// Print byte columns as whole bytes rather than MB.
    #[arg(long)]
    raw: bool,
}

fn report_options(
    view: &ViewArgs,
    common: &Common,
    attribution: &AttributionArgs,
    interval: bool,
) -> anyhow::Result<ReportOptions> {
    let focus = match &view.focus {
        Some(re) => Some(
            regex::Regex::new(re)
                .with_context(|| format!("--focus {re:?} is not a valid regex"))?,
        ),
        None => None,
    };
    Ok(ReportOptions {
        measure: view.measure.measure(),
        show_bytes: view.show_bytes,
        focus,
        skip: common.skip(),
        nodecount: view.nodecount,
        interval,
        attribution: attribution.attribution(common)?,
        sort_by_cum: false,
        filters: Default::default(),
        lines: false,
    })
}

/// Writes to stdout; a closed pipe ends the program successfully.
fn emit(text: &str) -> anyhow::Result<()> {
    emit_with(|out| out.write_all(text.as_bytes()))
}

/// Writes to stdout through `write`, buffered, as it goes (a report of a million functions is
/// never all in memory as text); a closed pipe ends the program successfully.
fn emit_with(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => Ok(other.context("writing to stdout")?),
    }
}

/// `query`: SQL over fleet rows, printed as a table or CSV.
#[cfg(feature = "sql")]
fn query(args: QueryArgs) -> anyhow::Result<()> {
    use jeprof_compat::query;
    let files = query::parquet_files(&args.files)?;
    let batches = query::run(&args.sql, &files)?;
    if args.csv {
        emit_with(|out| query::write_csv(&batches, out))
    } else {
        emit(&query::format_table(&batches, args.raw))
    }
}

/// One line on stderr that does not stop the run.
fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "jeprof-compat: warning: {message}");
}

/// Writes an output file atomically (an exclusive 0600 temporary file beside it, renamed over it:
/// [`jeprof_dumpfmt::output::AtomicFile`]); on any error nothing is left at `path` but what was
/// there before.
fn write_output(
    path: &Path,
    body: impl FnOnce(&mut AtomicFile) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    jeprof_dumpfmt::output::write_atomically(path, |file| {
        body(file).with_context(|| format!("{}: write failed", path.display()))
    })
}

/// Perl's `%d` (which jeprof's integer figures go through) prints figures of 2^63 and more as
/// negative numbers or -1; we print what jeprof prints, and say so.
const PERL_OVERFLOW: &str = "some figures are 2^63 or more, which jeprof's integer printing \
     (Perl's %d) shows as negative numbers or -1, as here; the MB view (without --show_bytes) \
     prints them";

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Report(mut args) => {
            (args.dumps, args.common.binary) =
                binary::split_program(std::mem::take(&mut args.dumps), args.common.binary.take())?;
            report(args)
        }
        Command::Merge(args) => merge(args),
        Command::Pprof(mut args) => {
            (args.dumps, args.common.binary) =
                binary::split_program(std::mem::take(&mut args.dumps), args.common.binary.take())?;
            pprof(args)
        }
        Command::Diff(args) => diff(args),
        Command::Export(mut args) => {
            (args.dumps, args.common.binary) =
                binary::split_program(std::mem::take(&mut args.dumps), args.common.binary.take())?;
            export(args)
        }
        #[cfg(feature = "sql")]
        Command::Query(args) => query(args),
        #[cfg(not(feature = "sql"))]
        Command::Query(_) => Err(jeprof_compat::Error::Query {
            file: None,
            reason: "query: this jeprof-compat was built without its SQL engine; build it with \
                     `cargo install --path jeprof-compat --features sql`, or run the same SQL in \
                     DuckDB over the exported files (README, \"Fleet data in SQL\")"
                .into(),
        }
        .into()),
    }
}

/// A progress bar of `len` dumps on stderr when it is a terminal.
fn progress_bar(len: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} dumps, {per_sec}, eta {eta}")
            .expect("static template"),
    );
    Some(bar)
}

/// `--label KEY=VALUE`s, checked.
fn parse_labels(labels: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(labels
        .iter()
        .map(|l| export::parse_label(l))
        .collect::<Result<Vec<_>, _>>()?)
}

/// `export`: the dumps as rows of unbiased figures, in a Parquet file.
fn export(args: ExportArgs) -> anyhow::Result<()> {
    let labels = parse_labels(&args.labels)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)));
    let options = export::ExportOptions {
        symbolize: args.common.symbolize(),
        rows: export::RowOptions {
            skip: args.common.skip(),
            per_thread: args.per_thread,
        },
        labels,
        jobs,
    };
    let bar = progress_bar(args.dumps.len());
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    let result = export::export_files(
        &args.dumps,
        &args.output,
        &options,
        &args.common.read_policy(),
        &tick,
    );
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    result?;
    Ok(())
}

/// `report`: the text report, folded stacks or a flame graph of the dumps added up.
fn report(args: ReportArgs) -> anyhow::Result<()> {
    let mut options = report_options(&args.view, &args.common, &args.attribution, args.interval)?;
    options.sort_by_cum = args.cum;
    options.filters = args.views.filters()?;
    options.lines = args.views.lines;
    args.views.check()?;
    let symbolize = args.common.symbolize();
    let policy = args.common.read_policy();
    if args.by_scope || args.scope.is_some() {
        return report_scopes(&args, &options, &symbolize, &policy);
    }
    if args.views.needs_whole_dumps(&args.dumps) {
        return cli_views::report_whole(&args, &options);
    }
    if let Some(svg) = &args.output.flamegraph {
        let lines = report::collapsed_files(&args.dumps, &symbolize, &options, &policy)?;
        let title = report::flamegraph_title(&options, &args.dumps);
        write_output(svg, |out| {
            report::flamegraph(&lines, &options, &title, out)?;
            Ok(())
        })
    } else if args.output.collapsed {
        let lines = report::collapsed_files(&args.dumps, &symbolize, &options, &policy)?;
        emit(&report::format_collapsed(&lines))
    } else {
        let table = report::build_files(&args.dumps, &symbolize, &options, &policy)?;
        if table.prints_perl_overflow(&options) {
            warn(PERL_OVERFLOW);
        }
        emit_with(|out| {
            if options.interval {
                out.write_all(report::interval_legend().as_bytes())?;
            }
            table.write_text(&options, out)
        })
    }
}

/// `report --by-scope` and `report --scope LABEL`: per-scope totals, or the report of one scope's
/// in-use figures (the dumps read whole: scopes are not streamed).
fn report_scopes(
    args: &ReportArgs,
    options: &ReportOptions,
    symbolize: &jeprof_compat::SymbolizeOptions,
    policy: &jeprof_compat::ReadPolicy<'_>,
) -> anyhow::Result<()> {
    use jeprof_compat::scopes;
    let dumps = jeprof_compat::parse_all(&args.dumps, policy)?;
    if !dumps.iter().any(|(p, _)| !p.scopes.is_empty()) {
        anyhow::bail!(
            "no per-scope figures in {}: only dumps of jeprof-shim written while the program \
             entered scopes carry them (`# scope` lines)",
            if args.dumps.len() == 1 {
                "this dump"
            } else {
                "these dumps"
            }
        );
    }
    if options.measure.name().starts_with("alloc") {
        anyhow::bail!(
            "--{}: dumps hold per-scope figures for in-use memory only; use --inuse_space or \
             --inuse_objects",
            options.measure.name()
        );
    }
    let Some(label) = &args.scope else {
        let table = scopes::format_by_scope(&scopes::by_scope(&dumps), options.measure)
            .ok_or_else(|| anyhow::anyhow!("an in-use measure is needed"))?;
        return emit(&table);
    };
    let dumps = scopes::scope_dumps(dumps, label).map_err(|known| {
        anyhow::anyhow!(
            "no figures for scope `{label}` in the dumps; scopes they carry: {}",
            known.join(", ")
        )
    })?;
    if args.output.flamegraph.is_some() || args.output.collapsed {
        let resolved: Vec<_> = dumps
            .into_iter()
            .map(|(p, source)| jeprof_compat::resolve(p, &source, symbolize))
            .collect();
        let lines = report::collapsed(&resolved, options);
        if let Some(svg) = &args.output.flamegraph {
            let title = format!(
                "{} in scope {label}: {}",
                options.measure.name(),
                report::flamegraph_title(options, &args.dumps)
            );
            return write_output(svg, |out| {
                report::flamegraph(&lines, options, &title, out)?;
                Ok(())
            });
        }
        return emit(&report::format_collapsed(&lines));
    }
    let table = report::build_dumps(&dumps, symbolize, options);
    if report::prints_perl_overflow(&table, options) {
        warn(PERL_OVERFLOW);
    }
    emit_with(|out| {
        if options.interval {
            out.write_all(report::interval_legend().as_bytes())?;
        }
        out.write_all(report::format_text(&table, options).as_bytes())
    })
}

/// `merge`: the dumps unbiased and added up, written as a heap_v2 dump or pprof.
fn merge(args: MergeArgs) -> anyhow::Result<()> {
    let labels = parse_labels(&args.labels)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let inputs: Vec<merge::Input> = args
        .dumps
        .iter()
        .cloned()
        .map(merge::Input::Path)
        .chain(args.inputs_dir.iter().cloned().map(merge::Input::Dir))
        .chain(args.inputs_from.iter().cloned().map(merge::Input::List))
        .collect();
    let bar = if std::io::stderr().is_terminal() {
        // Counting reads each list and directory once more: only worth it for the bar. Standard
        // input cannot be read twice: then the bar counts without a total.
        let (bar, template) = match merge::count(&inputs)? {
            Some(total) => (
                indicatif::ProgressBar::new(total),
                "{bar:40} {pos}/{len} dumps, {per_sec}, eta {eta}",
            ),
            None => (
                indicatif::ProgressBar::no_length(),
                "{spinner} {pos} dumps, {per_sec}, {elapsed}",
            ),
        };
        bar.set_style(indicatif::ProgressStyle::with_template(template).expect("static template"));
        Some(bar)
    } else {
        None
    };
    let tick = || {
        if let Some(b) = &bar {
            b.inc(1);
        }
    };
    let acc = merge::merge_stream(
        merge::expand(inputs),
        &args.common.symbolize(),
        &args.common.read_policy(),
        jobs,
        &tick,
    )?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if acc.dumps() == 0 {
        anyhow::bail!(
            "no dumps to merge: the directories and lists given name none (a directory's files \
             whose names start with `.` are left out)"
        );
    }
    match args.format {
        Format::HeapV2 => {
            let mut profile = acc.to_profile();
            // The labels every input agrees on, with `--label`s over them.
            for (key, value) in &labels {
                jeprof_dumpfmt::labels::set(&mut profile.labels, key, value);
            }
            let options = args.rounding.output_rounding().write_options();
            jeprof_dumpfmt::write::write_file(&profile, &args.output, &options)?;
        }
        Format::Pprof => {
            let resolved = acc.to_resolved("merge");
            let options = pprof::PprofOptions {
                skip: args.common.skip(),
                attribution: args.attribution.attribution(&args.common)?,
                binary: args.common.binary.clone(),
                labels,
            };
            let pb = pprof::build_with(&[resolved], &options);
            write_output(&args.output, |out| Ok(pprof::write_gz(&pb, out)?))?;
        }
    }
    Ok(())
}

/// `pprof`: the dumps added up, as a gzipped profile.proto.
fn pprof(args: PprofArgs) -> anyhow::Result<()> {
    let options = pprof::PprofOptions {
        skip: args.common.skip(),
        attribution: args.attribution.attribution(&args.common)?,
        binary: args.common.binary.clone(),
        labels: parse_labels(&args.labels)?,
    };
    let pb = pprof::build_files(
        &args.dumps,
        &args.common.symbolize(),
        &options,
        &args.common.read_policy(),
    )?;
    write_output(&args.output, |out| Ok(pprof::write_gz(&pb, out)?))
}

/// `diff`: per-function change between two dumps, with its interval.
fn diff(args: DiffArgs) -> anyhow::Result<()> {
    let options = report_options(&args.view, &args.common, &args.attribution, true)?;
    let sym = args.common.symbolize();
    let policy = args.common.read_policy();
    // Read one stack at a time, one dump after the other, into figures per function.
    let diff = diff::compare_files(&args.base, &args.new, args.cum, &sym, &options, &policy)?;
    if diff.prints_perl_overflow(&options) {
        warn(PERL_OVERFLOW);
    }
    emit_with(|out| diff.write(&options, out))
}

/// jeprof (Perl's Getopt::Long) takes long options after one dash as well as two (`-text`,
/// `-show_bytes`, `-focus=x`); clap takes two. Rewrites `-name` and `-name=value` to two dashes
/// where `name` is a long option (or alias) of the subcommand named first, up to a `--`. A value
/// given as the next argument (`--focus -x`) is left alone, as are short options (`-o`) and
/// anything else.
fn jeprof_dashes(args: Vec<OsString>) -> Vec<OsString> {
    let command = Cli::command();
    let Some(sub) = args
        .get(1)
        .and_then(|a| a.to_str())
        .and_then(|name| command.find_subcommand(name))
    else {
        return args;
    };
    // Each long name, and whether it takes a value.
    let mut longs: Vec<(&str, bool)> = Vec::new();
    for arg in sub.get_arguments() {
        let takes_value = arg.get_action().takes_values();
        for name in arg
            .get_long()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default())
        {
            longs.push((name, takes_value));
        }
    }
    let mut out = Vec::with_capacity(args.len());
    let mut value_next = false;
    let mut options_done = false;
    for arg in args {
        let text = arg.to_str().unwrap_or("");
        let is_value = std::mem::take(&mut value_next);
        if is_value || options_done || !text.starts_with('-') || text.starts_with("--") {
            options_done |= !is_value && text == "--";
            if let Some(name) = text.strip_prefix("--") {
                value_next = !name.contains('=') && longs.contains(&(name, true));
            }
            out.push(arg);
            continue;
        }
        let name = text[1..].split('=').next().unwrap_or("");
        match longs.iter().find(|(long, _)| *long == name) {
            Some(&(_, takes_value)) if name.len() > 1 => {
                value_next = takes_value && !text.contains('=');
                out.push(OsString::from(format!("-{text}")));
            }
            _ => out.push(arg),
        }
    }
    out
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(jeprof_dashes(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            // --help and --version go to stdout; a closed pipe there is fine.
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the file, the line and what was wrong come from the reader's error.
            // Each cause once: the reader's errors already include their source's text.
            let mut message = String::new();
            for cause in e.chain() {
                let text = cause.to_string();
                if !message.contains(&text) {
                    if !message.is_empty() {
                        message.push_str(": ");
                    }
                    message.push_str(&text);
                }
            }
            let message = message.replace('\n', " ");
            let _ = writeln!(std::io::stderr(), "jeprof-compat: {message}");
            ExitCode::from(2)
        }
    }
}
