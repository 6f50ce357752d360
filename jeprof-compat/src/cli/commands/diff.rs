//! `diff`: per-function change between two dumps, with its interval.

use jeprof_compat::diff;
use jeprof_compat::input::series_key;

use crate::cli::defs::DiffArgs;
use crate::cli::options::report_options;
use crate::cli::output::{emit_with, warn, PERL_OVERFLOW};

pub(crate) fn run(args: DiffArgs) -> anyhow::Result<()> {
    let options = report_options(&args.view, &args.common, &args.attribution, true)?;
    let sym = args.common.symbolize()?;
    let policy = args.common.read_policy();
    // A URL or an unreadable file has no key: the comparison reports what is wrong with it.
    if let (Ok(base), Ok(new)) = (series_key(&args.base), series_key(&args.new)) {
        if jeprof_dumpfmt::series::written_after(&base, &new) {
            warn(&format!(
                "BASE {} was written after NEW {} (by their time labels or jemalloc's sequence \
                 numbers): what grew shows as shrinking; give the earlier dump first",
                base.path, new.path
            ));
        }
    }
    // Read one stack at a time, one dump after the other, into figures per function.
    let diff = diff::compare_files(&args.base, &args.new, args.cum, &sym, &options, &policy)?;
    if diff.prints_perl_overflow(&options) {
        warn(PERL_OVERFLOW);
    }
    emit_with(|out| diff.write(&options, out))
}
