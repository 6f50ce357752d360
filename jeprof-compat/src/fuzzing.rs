//! The body of the fuzz target (`fuzz/fuzz_targets/read.rs`) and of the corpus-replay test: feed
//! arbitrary bytes through the reader and, when they parse, through every report, the merge, the
//! writer and pprof. Nothing may panic; a merged dump we write must read back.

use prost::Message;

use crate::report::{self, Measure, ReportOptions};
use crate::{pprof, Accumulator, SymbolizeOptions};

/// Runs `bytes` through everything. Panics only on a bug.
pub fn exercise(bytes: &[u8]) {
    let Ok(profile) = jeprof_dumpfmt::read::parse(bytes) else {
        return;
    };
    // The merge's fast path must fold a dump exactly as resolving it and adding it does.
    let mut fast = Accumulator::new();
    fast.add_dump(profile.clone(), "fuzz", &SymbolizeOptions::default());
    fast.add_dump(profile.clone(), "fuzz", &SymbolizeOptions::default());
    let resolved = crate::resolve(profile, "fuzz", &SymbolizeOptions::default());
    let profiles = [resolved];
    for measure in [
        Measure::InuseSpace,
        Measure::InuseObjects,
        Measure::AllocSpace,
        Measure::AllocObjects,
    ] {
        for show_bytes in [false, true] {
            let options = ReportOptions {
                measure,
                show_bytes,
                interval: true,
                ..ReportOptions::default()
            };
            let r = report::build(&profiles, &options);
            let _ = report::format_text(&r, &options);
            let _ = report::format_collapsed(&report::collapsed(&profiles, &options));
        }
    }
    let _ = pprof::build(&profiles, Default::default()).encode_to_vec();
    let mut acc = Accumulator::new();
    acc.add(&profiles[0]);
    acc.add(&profiles[0]);
    // Compared as text, so that NaN figures compare equal to themselves.
    assert_eq!(
        format!("{:?}", fast.canonical()),
        format!("{:?}", acc.canonical()),
        "add_dump and resolve + add disagree"
    );
    let merged = acc.to_profile();
    if let Ok(text) =
        jeprof_dumpfmt::write::to_string(&merged, &jeprof_dumpfmt::WriteOptions::default())
    {
        if let Err(e) = jeprof_dumpfmt::read::parse(text.as_bytes()) {
            panic!("a merged dump we wrote does not read back: {e}\n{text}");
        }
    }
}
