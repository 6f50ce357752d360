//! The `report` options of jeprof's other views and filters (`--base`, `--thread`, `--ignore`,
//! ...), parsed here and carried out by [`jeprof_compat::views`].

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::views::base::{self, ThreadChoice};
use jeprof_compat::views::filters::StackFilters;
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
    /// Leave out the stacks with a frame whose function (or 16-digit address) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    ignore: Option<String>,
    /// Keep only the frames whose function matches REGEX (a stack left with none is left out).
    #[arg(long, value_name = "REGEX")]
    retain: Option<String>,
    /// Leave out the frames whose function matches REGEX (a stack left with none is left out).
    #[arg(long, value_name = "REGEX")]
    exclude: Option<String>,
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
    pub(crate) fn needs_whole_dumps(&self) -> bool {
        self.base.is_some() || self.thread.is_some()
    }

    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.drop_negative && self.base.is_none() {
            warn("--drop_negative does nothing without --base");
        }
        Ok(())
    }
}

/// `report` with `--base` or `--thread`: the profiles to report (the dumps minus the base, or each
/// chosen thread of the first dump, labelled), then the usual text or folded stacks of each.
pub(crate) fn report_whole(args: &ReportArgs, options: &ReportOptions) -> anyhow::Result<()> {
    let views = &args.views;
    let symbolize: SymbolizeOptions = args.common.symbolize();
    let policy: ReadPolicy<'static> = args.common.read_policy();
    let mut dumps = Vec::with_capacity(args.dumps.len());
    for path in &args.dumps {
        dumps.push(read_dump(path, &policy)?);
    }
    let base = match &views.base {
        Some(path) => Some(read_dump(path, &policy)?),
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
