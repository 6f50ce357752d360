//! `report`'s views of whole dumps: jeprof's `--base`, `--thread`, `--list`, `--dot`, `--svg` and
//! `--callgrind`, and a process's profile fetched over HTTP, carried out by
//! [`jeprof_compat::views`]. The other reports read one stack at a time.

use std::path::PathBuf;

use anyhow::Context;
use jeprof_compat::input::{read_dump, ReadPolicy};
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::symbolize::{resolve, SymbolizeOptions};
use jeprof_compat::views::{base, callgrind, dot, list, remote};

use crate::cli::defs::ReportArgs;
use crate::cli::options::regex;
use crate::cli::output::{emit, warn, PERL_OVERFLOW};

/// `report` with `--base`, `--thread` or a view that needs whole dumps (`--callgrind`): the
/// profiles to report (the dumps added up, minus the base, or each chosen thread of the first
/// dump, labelled), then the view of each.
pub(crate) fn report_whole(args: &ReportArgs, options: &ReportOptions) -> anyhow::Result<()> {
    let symbolize: SymbolizeOptions = args.common.symbolize()?;
    let profiles = whole_profiles(args)?;
    let source = args.dumps[0].display().to_string();
    if args.output.flamegraph.is_some() {
        anyhow::bail!("--flamegraph draws the dumps as they are: it takes no --base or --thread");
    }
    let mut text = String::new();
    for (thread, profile) in profiles {
        let view = View {
            args,
            options,
            symbolize: &symbolize,
            source: &source,
        };
        text.push_str(&view.of(thread, profile)?);
    }
    emit(&text)
}

/// The profiles `report_whole` reports: the dumps (or processes' profiles fetched over HTTP)
/// added up less `--base`, or with `--thread` each chosen thread of the first dump.
fn whole_profiles(
    args: &ReportArgs,
) -> anyhow::Result<Vec<(Option<u64>, jeprof_dumpfmt::Profile)>> {
    let views = &args.views;
    let policy: ReadPolicy<'static> = args.common.read_policy();
    let timeout = views.timeout();
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
    Ok(match (views.thread, first) {
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
    })
}

/// What one profile of `report_whole` is shown with.
struct View<'a> {
    args: &'a ReportArgs,
    options: &'a ReportOptions,
    symbolize: &'a SymbolizeOptions,
    source: &'a str,
}

impl View<'_> {
    /// The text of the view asked for (`--list`, `--dot`/`--svg`, `--callgrind`, `--collapsed`,
    /// else jeprof's `--text`) of one profile, `thread` naming its thread.
    fn of(&self, thread: Option<u64>, profile: jeprof_dumpfmt::Profile) -> anyhow::Result<String> {
        let (views, options, symbolize) = (&self.args.views, self.options, self.symbolize);
        if let Some(re) = &views.list {
            let regex = regex("--list", re)?;
            let Some(program) = &symbolize.binary else {
                anyhow::bail!("--list reads the program's code: give it with --binary");
            };
            let resolved = resolve(profile, self.source, symbolize);
            return Ok(list::listing(
                &[resolved],
                options,
                program,
                &regex,
                &mut |m| warn(&m),
            )?);
        }
        if views.dot || views.svg {
            return self.graph(profile);
        }
        if views.callgrind {
            let resolved = resolve(profile, self.source, symbolize);
            let mut out = Vec::new();
            callgrind::write(&[resolved], options, &mut out)?;
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
        if self.args.output.collapsed {
            let resolved = resolve(profile, self.source, symbolize);
            return Ok(report::format_collapsed(&report::collapsed(
                &[resolved],
                options,
            )));
        }
        Ok(self.text(thread, profile))
    }

    /// `--dot`, or `--svg` (the graph drawn by Graphviz).
    fn graph(&self, profile: jeprof_dumpfmt::Profile) -> anyhow::Result<String> {
        let views = &self.args.views;
        let options_dot = dot::DotOptions {
            nodecount: self.options.nodecount.unwrap_or(80),
            nodefraction: views.nodefraction,
            edgefraction: views.edgefraction,
            svg: views.svg,
            program: dot::program_name(
                std::slice::from_ref(&profile),
                self.symbolize.binary.as_deref(),
            ),
            ..dot::DotOptions::default()
        };
        let resolved = resolve(profile, self.source, self.symbolize);
        let Some((graph, dropping)) = dot::graph(&[resolved], self.options, &options_dot) else {
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
            run_graphviz(&graph)
        } else {
            Ok(graph)
        }
    }

    /// jeprof's `--text` report, each thread's total labelled as jeprof labels it.
    fn text(&self, thread: Option<u64>, profile: jeprof_dumpfmt::Profile) -> String {
        let options = self.options;
        let built = report::build_dumps(
            &[(profile, self.source.to_string())],
            self.symbolize,
            options,
        );
        if report::prints_perl_overflow(&built, options) {
            warn(PERL_OVERFLOW);
        }
        let mut text = String::new();
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
        text
    }
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
