//! `report`: the text report, folded stacks or a flame graph of the dumps added up, read one stack
//! at a time; per-scope reports; and, through [`crate::cli::whole_dumps`], jeprof's views of whole dumps.

use jeprof_compat::input::{parse_all, ReadPolicy};
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::scopes;
use jeprof_compat::symbolize::{resolve, SymbolizeOptions};

use crate::cli::defs::ReportArgs;
use crate::cli::options::{per_process, report_options};
use crate::cli::output::{emit, emit_with, warn, write_output, PERL_OVERFLOW};
use crate::cli::whole_dumps;

/// Takes jeprof's form `report PROGRAM DUMP...` as well.
pub(crate) fn run(mut args: ReportArgs) -> anyhow::Result<()> {
    args.common.take_program(&mut args.dumps)?;
    // `--allocator` reads each process's last dump itself (and says so), and `--html` reads
    // several dumps as one process's series: neither adds a process's dumps up.
    if !args.allocator && !args.rss && args.output.html.is_none() {
        per_process(
            &mut args.dumps,
            args.latest_per_process,
            jeprof_compat::input::repeated_process_warning,
        )?;
    }
    let mut options = report_options(&args.view, &args.common, &args.attribution, args.interval)?;
    options.sort_by_cum = args.cum;
    options.filters = args.views.filters()?;
    options.lines = args.views.lines;
    args.views.check();
    let symbolize = args.common.symbolize()?;
    let policy = args.common.read_policy();
    if args.by_scope || args.scope.is_some() {
        return report_scopes(&args, &options, &symbolize, &policy);
    }
    if args.allocator {
        return report_allocator(&args, &options, &symbolize, &policy);
    }
    if args.rss {
        return report_rss(&args, &options, &symbolize, &policy);
    }
    if let Some(html) = &args.output.html {
        return report_html(&args, html, &options, &symbolize, &policy);
    }
    if args.views.needs_whole_dumps(&args.dumps) {
        return whole_dumps::report_whole(&args, &options);
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
        if table.total() == 0.0 {
            warn(&empty_heap(&args.dumps, &options));
        }
        emit_with(|out| {
            if options.interval {
                out.write_all(report::interval_legend().as_bytes())?;
            }
            table.write_text(&options, out)
        })
    }
}

/// `report --html OUT.html`: the page of the dumps ([`jeprof_compat::page`]), written whole or
/// not at all.
fn report_html(
    args: &ReportArgs,
    html: &std::path::Path,
    options: &ReportOptions,
    symbolize: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> anyhow::Result<()> {
    // --base is the page's "what grew since" (a dump file), not jeprof's subtraction.
    if args.views.needs_whole_dumps_besides_base(&args.dumps) {
        anyhow::bail!(
            "--html reads dump files with the plain table only (no URL, --thread, --callgrind, \
             --list, --dot or --svg; --base names the earlier dump to show what grew since); a \
             running process with the shim's listener serves the same page at /"
        );
    }
    // The page is one of the project's own views: its frames follow the sized rule.
    let symbolize = SymbolizeOptions {
        rule: jeprof_compat::symbolize::NameRule::Sized,
        ..symbolize.clone()
    };
    let page = jeprof_compat::page::page_files(
        &args.dumps,
        args.views.base.as_deref(),
        &symbolize,
        options,
        policy,
    )?;
    let text = jeprof_page::render(&page);
    write_output(html, |out| {
        use std::io::Write as _;
        out.write_all(text.as_bytes())?;
        Ok(())
    })
}

/// `report --allocator`: the table, a blank line, then the allocator's figures and their reading.
/// The figures are read first, so a dump without them fails before anything is printed.
fn report_allocator(
    args: &ReportArgs,
    options: &ReportOptions,
    symbolize: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> anyhow::Result<()> {
    plain_table_only(
        args,
        "--allocator",
        "for a running process, fetch /debug/pprof/allocator from its listener",
    )?;
    let figures = report::allocator_files(&args.dumps, policy)?;
    // The table of the same dumps as the figures: each process's last.
    let keys = jeprof_compat::input::series_keys(&args.dumps)?;
    let latest = jeprof_compat::input::latest_per_process(&args.dumps, &keys);
    let table = report::build_files(&latest, symbolize, options, policy)?;
    if table.prints_perl_overflow(options) {
        warn(PERL_OVERFLOW);
    }
    emit_with(|out| {
        if options.interval {
            out.write_all(report::interval_legend().as_bytes())?;
        }
        table.write_text(options, &mut *out)?;
        out.write_all(b"\n")?;
        out.write_all(figures.text().as_bytes())
    })
}

/// `report --rss [--json]`: where the resident memory is, per function, then the RSS reconciled.
fn report_rss(
    args: &ReportArgs,
    options: &ReportOptions,
    symbolize: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> anyhow::Result<()> {
    plain_table_only(
        args,
        "--rss",
        "for a running process, fetch /debug/pprof/rss from its listener",
    )?;
    let [dump] = args.dumps.as_slice() else {
        anyhow::bail!(
            "--rss reads one dump ({} given): residency is of one process at one moment, and \
             does not add up over dumps",
            args.dumps.len()
        );
    };
    let report = report::rss_file(dump, symbolize, options, policy)?;
    if args.json {
        let mut text = serde_json::to_string_pretty(&report.to_json())?;
        text.push('\n');
        return emit(&text);
    }
    emit(&report.text(options.show_bytes))
}

/// `report --by-scope` and `report --scope LABEL`: per-scope totals, or the report of one scope's
/// in-use figures (the dumps read whole: scopes are not streamed).
fn report_scopes(
    args: &ReportArgs,
    options: &ReportOptions,
    symbolize: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> anyhow::Result<()> {
    let dumps = parse_all(&args.dumps, policy)?;
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
            .map(|(p, source)| resolve(p, &source, symbolize))
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

/// `--html` and `--allocator` read dump files and print beside the plain table: refused with the
/// options that need jeprof's whole-dump views (or a URL), saying what to use instead.
fn plain_table_only(args: &ReportArgs, flag: &str, instead: &str) -> anyhow::Result<()> {
    if args.views.needs_whole_dumps(&args.dumps) {
        anyhow::bail!(
            "{flag} reads dump files with the plain table only (no URL, --base, --thread, \
             --callgrind, --list, --dot or --svg); {instead}"
        );
    }
    Ok(())
}

/// What `report` says on standard error when the total is zero: it prints nothing on standard
/// output, as `jeprof --text` prints nothing for it (not even its `Total:` line, which it leaves
/// out when the total is 0), so that the table stays jeprof's.
fn empty_heap(dumps: &[std::path::PathBuf], options: &ReportOptions) -> String {
    let what = match dumps {
        [one] => one.display().to_string(),
        many => format!("the {} dumps", many.len()),
    };
    format!(
        "{what}: the total of {} is 0 (an empty heap, such as a dump taken at exit): nothing to \
         print, as jeprof --text prints nothing for it",
        options.measure.name()
    )
}
