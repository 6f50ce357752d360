//! `leaks`: the sites of one process's series of dumps that are still growing.

use std::io::Write as _;

use jeprof_compat::leaks::{self, LeakOptions};
use jeprof_compat::report::ReportOptions;

use crate::cli::defs::LeaksArgs;
use crate::cli::options::regex;
use crate::cli::output::{emit, emit_with, write_output};

pub(crate) fn run(args: LeaksArgs) -> anyhow::Result<()> {
    let options = LeakOptions {
        test: jeprof_dumpfmt::leaks::LeakOptions {
            window: args.window,
            steps: args.steps,
            fdr: args.fdr,
        },
        per_stack: args.per_stack,
        points: args.points,
        limit: args.limit,
        report: ReportOptions {
            skip: args.common.skip(),
            focus: args
                .focus
                .as_deref()
                .map(|f| regex("--focus", f))
                .transpose()?,
            attribution: args.attribution.attribution(&args.common)?,
            ..ReportOptions::default()
        },
    };
    // The project's rule: a frame past every sized symbol is `object+0xOFFSET`, never a guessed
    // neighbour's name; frames inside the allocator's object are the allocator's whatever their
    // name (`jeprof_dumpfmt::charge`).
    let symbolize = args.common.symbolize_own()?;
    let policy = args.common.read_policy();
    let found = leaks::find_leaks(&args.dumps, &symbolize, &options, &policy)?;
    if let Some(svg) = &args.svg {
        let mut text = String::new();
        found.write_svg(8, &mut text)?;
        write_output(svg, |out| Ok(out.write_all(text.as_bytes())?))?;
    }
    if args.json {
        let mut text = serde_json::to_string_pretty(&found.to_json())?;
        text.push('\n');
        emit(&text)
    } else {
        emit_with(|out| found.write_text(out))
    }
}
