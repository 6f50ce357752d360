//! `diff`: per-function change between two dumps, with its interval.

use jeprof_compat::diff;

use crate::cli::defs::DiffArgs;
use crate::cli::options::report_options;
use crate::cli::output::{emit_with, warn, PERL_OVERFLOW};

pub(crate) fn run(args: DiffArgs) -> anyhow::Result<()> {
    let options = report_options(&args.view, &args.common, &args.attribution, true)?;
    let sym = args.common.symbolize()?;
    let policy = args.common.read_policy();
    // Read one stack at a time, one dump after the other, into figures per function.
    let diff = diff::compare_files(&args.base, &args.new, args.cum, &sym, &options, &policy)?;
    if diff.prints_perl_overflow(&options) {
        warn(PERL_OVERFLOW);
    }
    emit_with(|out| diff.write(&options, out))
}
