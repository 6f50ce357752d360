//! The `report` options of jeprof's other views and filters (`--base`, `--thread`, `--ignore`,
//! ...), parsed here and carried out by [`jeprof_compat::views`].

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::views::base::{self, ThreadChoice};
use jeprof_compat::views::filters::StackFilters;
use jeprof_compat::views::{callgrind, dot, list, remote};
use jeprof_compat::{read_dump, ReadPolicy, SymbolizeOptions};

use crate::{emit, warn, ReportArgs};

#[derive(Args)]
pub(crate) struct JeprofViewArgs {
    /// Subtract this dump's figures, stack by stack (jeprof's --base: a dump of the same process;
    /// a stack only in BASE shows negative).
    #[arg(long, value_name = "BASE")]
    base: Option<PathBuf>,
    /// With --base: a stack whose figure would be negative counts zero.
    #[arg(long = "drop_negative", alias = "drop-negative")]
    drop_negative: bool,
    /// Report thread N of the first dump (the N of its `tN:` lines), or every thread with '*',
    /// one report each, instead of the whole process.
    #[arg(long, value_name = "N|*")]
    thread: Option<ThreadChoice>,
    /// Leave out the stacks with a frame whose function, 16-digit address or source line
    /// (file:line) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    ignore: Option<String>,
    /// Keep only the frames whose function matches REGEX (a stack left with none is left out).
    #[arg(long, value_name = "REGEX")]
    retain: Option<String>,
    /// Leave out the frames whose function matches REGEX (a stack left with none is left out).
    #[arg(long, value_name = "REGEX")]
    exclude: Option<String>,
    /// A row per function and source line (`name file:line`), from the program's DWARF or the
    /// dump's symbol section (where jeprof refuses: it needs a binary). jeprof's
    /// ` (discriminator N)` suffixes are not printed.
    #[arg(long)]
    pub(crate) lines: bool,
    /// Print the call graph in Callgrind's format (for callgrind_annotate and KCachegrind), as
    /// jeprof does: `file:line:function` per frame, the line from the program's DWARF or the
    /// dump's symbol section, `??:0` where unknown. Names are whole (jeprof cuts a function name
    /// at its first space, which garbles Rust names; --jeprof_names gives its short names).
    #[arg(long, conflicts_with_all = ["text", "collapsed", "flamegraph"])]
    callgrind: bool,
    /// Print the source of the functions matching REGEX with each line's flat and cumulative
    /// figures, as jeprof does (needs --binary, its DWARF and the source files).
    #[arg(long, value_name = "REGEX", conflicts_with_all = ["text", "collapsed", "flamegraph", "callgrind"])]
    list: Option<String>,
    /// Print the call graph in Graphviz's dot language, as jeprof does (--nodecount nodes, 80 by
    /// default).
    #[arg(long, conflicts_with_all = ["text", "collapsed", "flamegraph", "callgrind", "list"])]
    dot: bool,
    /// Print the call graph as SVG: the --dot graph drawn by Graphviz's `dot` (install graphviz).
    #[arg(long, conflicts_with_all = ["text", "collapsed", "flamegraph", "callgrind", "list", "dot"])]
    svg: bool,
    /// --dot/--svg: leave out nodes whose cumulative figure is at most this share of the total.
    #[arg(long, value_name = "F", default_value_t = 0.005)]
    nodefraction: f64,
    /// --dot/--svg: leave out edges (but a node's first) of at most this share of the total.
    #[arg(long, value_name = "F", default_value_t = 0.001)]
    edgefraction: f64,
    /// Seconds to wait for each page of a process's profile (DUMP given as
    /// http://host:port/pprof/heap, as jeprof fetches it).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    timeout: u64,
}

fn regex(option: &str, re: &Option<String>) -> anyhow::Result<Option<regex::Regex>> {
    re.as_deref()
        .map(|re| {
            regex::Regex::new(re).with_context(|| format!("--{option} {re:?} is not a valid regex"))
        })
        .transpose()
}

impl JeprofViewArgs {
    /// `--ignore`, `--retain`, `--exclude`.
    pub(crate) fn filters(&self) -> anyhow::Result<StackFilters> {
        Ok(StackFilters {
            ignore: regex("ignore", &self.ignore)?,
            retain: regex("retain", &self.retain)?,
            exclude: regex("exclude", &self.exclude)?,
        })
    }

    /// Whether the report needs the dumps whole (subtracted, or split by thread) rather than
    /// read one stack at a time.
    pub(crate) fn needs_whole_dumps(&self, dumps: &[PathBuf]) -> bool {
        let url = |p: &PathBuf| p.to_str().is_some_and(remote::is_url);
        dumps.iter().any(url)
            || self.base.as_ref().is_some_and(url)
            || self.base.is_some()
            || self.thread.is_some()
            || self.callgrind
            || self.list.is_some()
            || self.dot
            || self.svg
    }

    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.drop_negative && self.base.is_none() {
            warn("--drop_negative does nothing without --base");
        }
        Ok(())
    }
}

/// `report` with `--base`, `--thread` or a view that needs whole dumps (`--callgrind`): the
/// profiles to report (the dumps added up, minus the base, or each chosen thread of the first
/// dump, labelled), then the view of each.
pub(crate) fn report_whole(args: &ReportArgs, options: &ReportOptions) -> anyhow::Result<()> {
    let views = &args.views;
    let symbolize: SymbolizeOptions = args.common.symbolize();
    let policy: ReadPolicy<'static> = args.common.read_policy();
    let timeout = std::time::Duration::from_secs(views.timeout);
    // A dump, or a process's profile fetched as jeprof fetches it (symbolized through the
    // process, its symbol table naming the program).
    let read = |path: &PathBuf| -> anyhow::Result<jeprof_dumpfmt::Profile> {
        match path.to_str().filter(|p| remote::is_url(p)) {
            Some(url) => Ok(remote::fetch(url, timeout)?.profile),
            None => Ok(read_dump(path, &policy)?),
        }
    };
    let mut dumps = Vec::with_capacity(args.dumps.len());
    for path in &args.dumps {
        dumps.push(read(path)?);
    }
    let base = match &views.base {
        Some(path) => Some(read(path)?),
        None => None,
    };
    let first = views.thread.map(|_| dumps[0].clone());
    let combined = base::subtract_base(dumps, base, views.drop_negative);
    let profiles: Vec<(Option<u64>, jeprof_dumpfmt::Profile)> = match (views.thread, first) {
        (Some(which), Some(first)) => {
            let threads = base::thread_profiles(&first, &combined, which);
            if threads.is_empty() {
                warn(&format!(
                    "{}: no such thread (no `tN:` line for it): nothing to report",
                    args.dumps[0].display()
                ));
            }
            threads.into_iter().map(|(t, p)| (Some(t), p)).collect()
        }
        _ => vec![(None, combined)],
    };
    let source = args.dumps[0].display().to_string();
    if args.output.flamegraph.is_some() {
        anyhow::bail!("--flamegraph draws the dumps as they are: it takes no --base or --thread");
    }
    let mut text = String::new();
    for (thread, profile) in profiles {
        if let Some(re) = &views.list {
            let regex = regex::Regex::new(re)
                .with_context(|| format!("--list {re:?} is not a valid regex"))?;
            let Some(program) = &symbolize.binary else {
                anyhow::bail!("--list reads the program's code: give it with --binary");
            };
            let resolved = jeprof_compat::resolve(profile, &source, &symbolize);
            text.push_str(&list::listing(
                &[resolved],
                options,
                program,
                &regex,
                &mut |m| warn(&m),
            )?);
            continue;
        }
        if views.dot || views.svg {
            let options_dot = dot::DotOptions {
                nodecount: options.nodecount.unwrap_or(80),
                nodefraction: views.nodefraction,
                edgefraction: views.edgefraction,
                svg: views.svg,
                program: dot::program_name(
                    std::slice::from_ref(&profile),
                    symbolize.binary.as_deref(),
                ),
                ..dot::DotOptions::default()
            };
            let resolved = jeprof_compat::resolve(profile, &source, &symbolize);
            let Some((graph, dropping)) = dot::graph(&[resolved], options, &options_dot) else {
                anyhow::bail!(
                    "no nodes to print: no function is left after the filters, or none is above \
                     --nodefraction {} of the total",
                    views.nodefraction
                );
            };
            if let Some(line) = dropping {
                warn(&line);
            }
            if views.svg {
                text.push_str(&run_graphviz(&graph)?);
            } else {
                text.push_str(&graph);
            }
            continue;
        }
        if views.callgrind {
            let resolved = jeprof_compat::resolve(profile, &source, &symbolize);
            let mut out = Vec::new();
            callgrind::write(&[resolved], options, &mut out)?;
            text.push_str(&String::from_utf8_lossy(&out));
            continue;
        }
        if args.output.collapsed {
            let resolved = jeprof_compat::resolve(profile, &source, &symbolize);
            text.push_str(&report::format_collapsed(&report::collapsed(
                &[resolved],
                options,
            )));
            continue;
        }
        let built = report::build_dumps(&[(profile, source.clone())], &symbolize, options);
        if report::prints_perl_overflow(&built, options) {
            warn(crate::PERL_OVERFLOW);
        }
        if options.interval {
            text.push_str(report::interval_legend());
        }
        let body = report::format_text(&built, options);
        match (thread, body.strip_prefix("Total: ")) {
            // jeprof labels each thread's total.
            (Some(t), Some(rest)) => {
                text.push_str(&format!("Total (t{t}): "));
                text.push_str(rest);
            }
            _ => text.push_str(&body),
        }
    }
    emit(&text)
}

/// `dot -Tsvg` of `graph`, as jeprof pipes its graph through Graphviz.
fn run_graphviz(graph: &str) -> anyhow::Result<String> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = match Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "--svg draws the graph with Graphviz's `dot`, which is not on PATH: install graphviz \
             (e.g. `apt-get install graphviz`), or print the graph with --dot"
        ),
        Err(e) => return Err(e).context("running Graphviz's `dot -Tsvg`"),
    };
    // `dot` reads its whole input before it writes: write it all, then read.
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(graph.as_bytes())
            .context("writing the graph to Graphviz's `dot`")?;
    }
    let output = child
        .wait_with_output()
        .context("running Graphviz's `dot -Tsvg`")?;
    if !output.status.success() {
        anyhow::bail!(
            "Graphviz's `dot -Tsvg` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    String::from_utf8(output.stdout).context("Graphviz's `dot -Tsvg` wrote something not UTF-8")
}
