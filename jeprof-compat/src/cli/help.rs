//! The text printed after each command's options: examples, then what the figures mean.
//!
//! clap wraps this text at the terminal's width, and a wrapped example is a different command (the
//! continuation starts a line of its own): every example line is at most 80 columns, so that an
//! 80-column terminal prints each one whole. A comment goes on its own line above its command; a
//! long command continues on an indented line (after `\`, `&&` or inside a quoted string), as it
//! would be typed. Paragraphs are single lines, for clap to fill to any width.

/// What `-h` prints after a subcommand's options: `-h` is one screen (each option's first
/// sentence), `--help` the manual (every option in full, examples, what the figures mean), as
/// ripgrep does.
pub(crate) const SHORT: &str = "Examples, and what each figure means: --help";

/// `jeprof-compat -h`.
pub(crate) const TOP_SHORT: &str = "\
Examples:
  jeprof-compat report --show_bytes app.1234.0.f.heap
  jeprof-compat merge -o fleet.heap replica-*.heap
  jeprof-compat leaks dumps/*.heap

More examples, and the exit status: --help; a command's options: COMMAND -h";

/// `jeprof-compat --help`.
pub(crate) const TOP: &str = "\
Examples:
  # like `jeprof --text --show_bytes`
  jeprof-compat report --text --show_bytes app.1234.0.f.heap
  # raw dump: symbolize through its maps
  jeprof-compat report --binary ./app app.heap
  # jeprof's own way of saying the same
  jeprof-compat report -text ./app app.heap
  # several dumps add up; 95% intervals
  jeprof-compat report --interval --focus 'cache::' a.heap b.heap
  jeprof-compat report --flamegraph heap.svg app.heap
  # unbias, then sum; jeprof reads fleet.heap
  jeprof-compat merge -o fleet.heap replica-*.heap
  jeprof-compat pprof -o app.pb.gz app.heap && go tool pprof -top app.pb.gz
  # names from debug files kept by build id, written into the dump
  jeprof-compat symbolize -o app.sym.heap --debug-dir /srv/debug app.heap
  # what grew, and is it more than noise?
  jeprof-compat diff before.heap after.heap
  # which sites are still growing, over a series of dumps?
  jeprof-compat leaks dumps/*.heap
  # rows for DuckDB, Spark, ClickHouse...
  jeprof-compat export -o fleet.parquet /dumps/*.heap

Exit status: 0 on success (also when the reader of stdout goes away), 2 on bad input or usage.";

/// `jeprof-compat report --help`.
pub(crate) const REPORT: &str = "\
Examples:
  jeprof-compat report --show_bytes dump.heap
      Total: 2161886 B
       2161886 100.0% 100.0%  2161886 100.0% leaf_alloc
             0   0.0% 100.0%  2161886 100.0% main
  jeprof-compat report --inuse_objects --interval dump.heap
  jeprof-compat report --collapsed dump.heap | sort
  jeprof-compat report --flamegraph out.svg --focus '^my_crate::' dump.heap
  # the allocator's figures after the table: where RSS went
  jeprof-compat report --allocator dump.heap
  # resident memory per function, then RSS reconciled (--json: sites)
  jeprof-compat report --rss dump.heap

Columns (as jeprof): flat, flat%, running sum%, cum, cum%, function. flat: allocated in the function \
itself; cum: in it or in anything it called; a function is counted once per stack. With --interval two \
columns give the 95% confidence interval of flat and cum (the variances of the stacks involved added up; \
a function in several stacks gets the sum of their variances, since stacks are independent samples).

Flat goes to the program's own code: walking a stack from the leaf, functions of Rust's standard \
library and of the allocator are passed over (they keep their cum) and flat goes to the first \
function that is not theirs. --hide REGEX sets the list, --hide '' or --jeprof_names charge flat \
as jeprof does; --cum sorts by cum.

--allocator prints, after the table and a blank line, the allocator's figures the dump carries \
(jemalloc's allocated, active, resident, mapped, retained, metadata; the profiler's own bytes; \
RssAnon and RssFile), one per line as `<name>: <bytes> B`, then what they say: how much of what \
the program holds in jemalloc the profile covers (with its 95% interval), fragmentation (active \
- allocated), resident beyond active, retained address space, the profiler's share. Several \
dumps are summed (a fleet). Dumps of jeprof-shim and libjeprof_preload.so carry the figures; a \
raw jemalloc dump or an older dump does not, and is an error.

--rss prints, instead of the table, per function the in-use bytes (its flat figure), the resident \
bytes of its live objects with their 95% interval, the swapped bytes and the stranded slab bytes \
charged to it (jemalloc only; '-' otherwise), then the anonymous RSS reconciled with these parts, \
dirty and muzzy pages, jemalloc's metadata and the profiler's bytes. One dump of jeprof-shim or \
libjeprof_preload.so (setting rss, on by default). --json prints an object with a `sites` array \
(function, inuse_bytes, resident_bytes, swapped_bytes, fragmentation_bytes, each with _lo and _hi) \
and `totals`.

jeprof's form `report PROGRAM DUMP...` (a program first) is `report --binary PROGRAM DUMP...`; \
options take one dash or two (-text, --text), as in jeprof.";

/// `jeprof-compat merge --help`.
pub(crate) const MERGE: &str = "\
Examples:
  jeprof-compat merge -o fleet.heap /dumps/*.heap && jeprof --text fleet.heap
  jeprof-compat merge -o fleet.heap --inputs-dir /dumps/ # a directory's dumps
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
heap_v2's integer rounding at each level).";

/// `jeprof-compat pprof --help`.
pub(crate) const PPROF: &str = "\
Example:
  jeprof-compat pprof -o app.pb.gz app.heap &&
      go tool pprof -top -sample_index=inuse_space app.pb.gz

Sample types: inuse_objects/count, inuse_space/bytes, alloc_objects/count, alloc_space/bytes; values are \
the unbiased estimates rounded to integers; period = the sample period.";

/// `jeprof-compat otlp --help`.
pub(crate) const OTLP: &str = "\
Examples:
  jeprof-compat otlp -o app.pb app.heap
  curl -H 'Content-Type: application/x-protobuf' --data-binary @app.pb \\
      http://collector:4318/v1development/profiles

Writes an ExportProfilesServiceRequest of OpenTelemetry's profiles signal (opentelemetry-proto \
v1.10.0, profiles/v1development; the Collector takes it with \
--feature-gates=+service.profilesSupport). One profile per sample type (inuse_space first, then \
inuse_objects, alloc_objects, alloc_space), values the unbiased estimates rounded to integers, \
period = the sample period; the same stacks, names and figures as `pprof` with the same options. \
Each dump's labels become its resource's attributes: service.name (the service label, else \
unknown_service:<program>), host.name, process.pid, process.executable.name, \
process.executable.build_id.gnu, other labels under their own keys; a mapping's build id is its \
process.executable.build_id.gnu attribute. On any error no output file is written.";

/// `jeprof-compat symbolize --help`.
pub(crate) const SYMBOLIZE: &str = "\
Examples:
  # a raw dump, named from debug files kept by build id; jeprof reads the result
  jeprof-compat symbolize -o app.sym.heap --debug-dir /srv/debug app.heap
  jeprof --text app.sym.heap
  # the program at hand instead
  jeprof-compat symbolize -o app.sym.heap --binary ./app app.heap

Each mapping's build id comes from the dump (jeprof-shim writes `# build_id:` lines), else from the \
mapped file or --binary where they are at hand (jemalloc's raw dumps carry none); its debug file is \
DIR/.build-id/<first 2 hex digits>/<the rest>.debug. A mapping holding frames whose debug file is in no \
--debug-dir is named in a warning (path and build id), and its frames keep what else names them (the \
mapped library, --binary) or stay addresses, as jeprof leaves what it cannot name; the exit status \
stays 0. A dump that already has symbols is written as read. report, pprof, export, merge, diff and \
leaks take --debug-dir too.";

/// `jeprof-compat diff --help`.
pub(crate) const DIFF: &str = "\
Example:
  jeprof-compat diff base.heap a.heap
      Total: base 57.3 MB, new 15.8 MB, change -41.5 ± 11.6 MB (significant)
      (± is the 95% interval of a change; * marks a significant one)
         change      ±95%      base       new sig function
          -50.2       9.8      50.2       0.0   * std::vector::push_back
           +8.7       6.2       7.1      15.8   * leaf_alloc

A change is flagged (*) when its 95% interval excludes zero. The two sides are treated as independent, \
which overstates the noise for two dumps of one process: flagged changes are real.";

/// `jeprof-compat leaks --help`.
pub(crate) const LEAKS: &str = "\
Examples:
  # the shim's interval dumps of one process
  jeprof-compat leaks /var/tmp/app.*.heap
  jeprof-compat leaks --limit 8G --svg leaks.svg dumps/*.heap
  jeprof-compat leaks --json --per-stack dumps/*.heap | jq '.suspects[0]'

A site (a stack's user frame, or the stack with --per-stack) is a suspect when its floor, the least \
it holds from a moment on, rose over each of the last --steps steps of the last --window of the \
series: a store that grew at warm-up and then stayed, a cache that fills and empties and a burst \
that came and went are not. Each step is a one-sided test of every later dump against the step's \
start, with a variance that accounts for samples shared between dumps of one process; the false \
discovery rate over all sites is held at --fdr (Benjamini-Hochberg). Figures: growth per hour (per \
dump when some dump has no time label) with its 95% interval; live bytes in the last dump; when the \
rise began; with --limit, when the process's heap (every stack) would reach the limit if that site \
alone kept growing, with the range from the rate's interval. A slow leak needs more samples to show: \
lower the sample period (sample_rate) or take more dumps over a longer time. docs/design.md \
section 18 has the test and why it is valid.";

/// `jeprof-compat export --help`.
pub(crate) const EXPORT: &str = "\
Examples:
  jeprof-compat export -o fleet.parquet /dumps/*.heap
  jeprof-compat export --label region=eu-west-1 --label env=prod \\
      -o day.parquet *.heap
  duckdb -c \"SELECT user_frame, SUM(inuse_bytes) AS bytes,
                    1.96 * SQRT(SUM(inuse_bytes_var)) AS ci95
             FROM 'fleet.parquet' GROUP BY user_frame
             ORDER BY bytes DESC LIMIT 20\"

One row per (dump, stack): figures are already unbiased with the dump's own period, so a plain SUM \
over any dumps is right, and SUM of a *_var column is the variance of that sum. Columns (schema v1, \
docs/design.md §13): schema_version, dump, pid, time, build_id, binary, labels (map), sample_period, \
thread, frames (leaf first, allocator frames removed), locations (module+0xoffset), addresses, leaf, \
user_frame (where reports charge flat), inuse_objects, inuse_bytes, alloc_objects, alloc_bytes and \
their *_var. On any error no output file is written.";

/// `jeprof-compat query --help` (a build with the `sql` feature; without it, `query` takes no
/// options and says what to do instead). The tests check its layout in every build.
#[cfg_attr(not(feature = "sql"), allow(dead_code))]
pub(crate) const QUERY: &str = "\
Examples:
  jeprof-compat query \\
      'SELECT * FROM by_function ORDER BY inuse_bytes DESC LIMIT 10' fleet/
  jeprof-compat query --csv 'SELECT * FROM by_label' 'fleet/*.parquet' \\
      > by_label.csv
  jeprof-compat query \"SELECT build_id, SUM(inuse_bytes) AS inuse_bytes \\
      FROM rows WHERE labels['service'] = 'api' GROUP BY build_id\" fleet/
  jeprof-compat query --print-sql clickhouse 's3://bucket/fleet/' > views.sql

The rows are table `rows`, one row per (dump, stack), already unbiased: a plain SUM over any grouping \
is right, and SUM of a column's `_var` is its variance. Views (each with inuse_bytes, inuse_objects, \
alloc_bytes, alloc_objects, a 95% interval `<column>_lo`..`<column>_hi` from the summed variances, \
and `dumps`): by_function (flat, by each row's user_frame), by_leaf, by_label (label, value), \
over_time (hour, UTC); and leak_trend (label, value, function: the leaks test over hours per label \
pair, with growth_bytes_per_hour, live_bytes, p_value, suspect). The same SQL runs in DuckDB over \
the same files (see the README); --print-sql ENGINE prints the statements that define `rows` over \
the files and the views for ClickHouse (file() or s3()), DuckDB, Spark or DataFusion, each in its \
own spelling, to run there.

Bytes print in MB as jeprof's reports do (--raw for whole bytes); --csv prints every value in full.";

#[cfg(test)]
mod tests {
    use super::*;

    /// Each text with the command it follows.
    const TEXTS: [(&str, &str); 10] = [
        ("jeprof-compat", TOP),
        ("report", REPORT),
        ("merge", MERGE),
        ("pprof", PPROF),
        ("otlp", OTLP),
        ("symbolize", SYMBOLIZE),
        ("diff", DIFF),
        ("leaks", LEAKS),
        ("export", EXPORT),
        ("query", QUERY),
    ];

    #[test]
    fn every_example_line_fits_80_columns() {
        for (command, text) in TEXTS {
            let examples = text.split("\n\n").next().unwrap_or("");
            assert!(examples.starts_with("Example"), "{command}: {examples:?}");
            for line in examples.lines().skip(1) {
                assert!(
                    line.starts_with("  "),
                    "{command}: {line:?} is not indented"
                );
                assert!(
                    line.chars().count() <= 80,
                    "{command}: {line:?} is wider than 80 columns"
                );
            }
        }
    }
}
