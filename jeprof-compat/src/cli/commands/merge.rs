//! `merge`: the dumps unbiased and added up, written as a heap_v2 dump or pprof.

use std::path::PathBuf;

use jeprof_compat::{input, merge, pprof};
use jeprof_dumpfmt::series::ProcessCounts;

use crate::cli::defs::{Format, MergeArgs};
use crate::cli::options::parse_labels;
use crate::cli::output::{warn, write_output, Progress};

pub(crate) fn run(args: MergeArgs) -> anyhow::Result<()> {
    let labels = parse_labels(&args.labels)?;
    let jobs = args.jobs();
    let inputs = args.inputs();
    let symbolize = args.common.symbolize()?;
    let policy = args.common.read_policy();
    let acc = if args.latest_per_process {
        // Every dump's process is known before any is merged: the list is held (its paths only).
        let paths: Vec<PathBuf> = merge::expand(inputs).collect::<Result<_, _>>()?;
        let latest = input::latest_per_process(&paths, &input::series_keys(&paths)?);
        let progress = Progress::of(latest.len());
        let acc = merge::merge_files(&latest, &symbolize, &policy, jobs, &|| progress.tick())?;
        progress.finish();
        acc
    } else {
        // Standard input cannot be read twice: a list read from it leaves the bar without a total.
        let progress = Progress::counted(|| Ok(merge::count(&inputs)?))?;
        // Each dump's process, from the front of its file as the list is read: one entry per
        // process, whatever the number of dumps.
        let mut counts = ProcessCounts::default();
        let counted = merge::expand(inputs).inspect(|path| {
            // A dump that cannot be read is the merge's error, in its place: not counted here.
            if let Some(key) = path.as_deref().ok().and_then(|p| input::series_key(p).ok()) {
                counts.add(key.process.as_ref());
            }
        });
        let acc = merge::merge_stream(counted, &symbolize, &policy, jobs, &|| progress.tick())?;
        progress.finish();
        if let Some(warning) = input::repeated_process_warning(&counts) {
            warn(&warning);
        }
        acc
    };
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
            // The encoding of the merged figures is most of the writing: spread as the reading was.
            let options = jeprof_dumpfmt::WriteOptions {
                jobs,
                ..args.rounding.output_rounding().write_options()
            };
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
