//! `merge`: the dumps unbiased and added up, written as a heap_v2 dump or pprof.

use jeprof_compat::{merge, pprof};

use crate::cli::defs::{Format, MergeArgs};
use crate::cli::options::parse_labels;
use crate::cli::output::{write_output, Progress};

pub(crate) fn run(args: MergeArgs) -> anyhow::Result<()> {
    let labels = parse_labels(&args.labels)?;
    let jobs = args.jobs();
    let inputs = args.inputs();
    // Standard input cannot be read twice: a list read from it leaves the bar without a total.
    let progress = Progress::counted(|| Ok(merge::count(&inputs)?))?;
    let acc = merge::merge_stream(
        merge::expand(inputs),
        &args.common.symbolize()?,
        &args.common.read_policy(),
        jobs,
        &|| progress.tick(),
    )?;
    progress.finish();
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
            let options = args.pprof_options(labels)?;
            let pb = pprof::build_with(&[resolved], &options);
            write_output(&args.output, |out| Ok(pprof::write_gz(&pb, out)?))?;
        }
    }
    Ok(())
}
