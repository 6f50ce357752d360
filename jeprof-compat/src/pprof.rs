//! pprof output from dumps: this tool resolves names (symbol sections, binaries, demangling) and
//! removes allocator frames as the text report does; [`jeprof_dumpfmt::pprof`] encodes.
//!
//! Mapping from a dump: the four heap sample types, one sample per stack with the unbiased figures
//! rounded to integers, one location per frame address (the address jeprof symbolizes: callers
//! minus one) with one line per function, innermost (inlined) first, mappings from the dump's memory
//! map, `period` = the sample period R (the smallest, for several dumps).

use std::collections::HashMap;
use std::sync::Arc;

pub use jeprof_dumpfmt::pprof::{read_gz, write_gz, PbProfile};
use jeprof_dumpfmt::pprof::{Builder, FunctionInfo, Header, LineInfo, MappingInfo};

use crate::names::SkipRules;
use crate::report::interesting_frames;
use crate::symbolize::{Frame, ResolvedProfile};

/// Reads dump files (in parallel, whole: pprof's locations need every stack resolved) and builds
/// their pprof message added together ([`build`]). Errors name the file and line.
pub fn build_files(
    paths: &[std::path::PathBuf],
    symbolize: &crate::SymbolizeOptions,
    skip: SkipRules,
    policy: &crate::ReadPolicy<'_>,
) -> Result<PbProfile, crate::Error> {
    let profiles = crate::load_all(paths, symbolize, policy)?;
    Ok(build(&profiles, skip))
}

/// Builds the pprof message for `profiles` added together (their stacks are concatenated; pprof adds
/// samples with the same locations).
pub fn build(profiles: &[ResolvedProfile], skip: SkipRules) -> PbProfile {
    let header = Header {
        period: profiles
            .iter()
            .map(|p| p.sample_period)
            .filter(|&r| r > 0)
            .min()
            .unwrap_or(0),
        comments: vec![
            "written by jeprof-compat from jemalloc heap_v2 dumps; values are unbiased estimates"
                .to_string(),
        ],
        ..Header::default()
    };
    let mut b = Builder::new(&header);
    for profile in profiles {
        // One location per resolved frame of this dump (frames are shared between its stacks).
        let mut locations: HashMap<*const Frame, u64> = HashMap::new();
        for stack in &profile.stacks {
            let frames = interesting_frames(&stack.frames, skip);
            let ids = frames
                .iter()
                .map(|f| {
                    *locations
                        .entry(Arc::as_ptr(f))
                        .or_insert_with(|| location(&mut b, profile, f))
                })
                .collect();
            b.sample(ids, &stack.counts, &[]);
        }
    }
    b.finish()
}

fn location(b: &mut Builder, profile: &ResolvedProfile, f: &Frame) -> u64 {
    let mapping_id = match crate::maps::find(&profile.mappings, f.key) {
        Some(m) => b.mapping(&MappingInfo {
            start: m.start,
            limit: m.end,
            offset: m.offset,
            file: m.path.clone(),
            build_id: String::new(),
        }),
        None => 0,
    };
    // An unsymbolized frame gets no lines, so pprof may symbolize it from the mapping's file.
    let names: &[String] = if f.symbolized { &f.names } else { &[] };
    let lines: Vec<LineInfo> = names
        .iter()
        .map(|n| LineInfo {
            function: FunctionInfo {
                name: n.clone(),
                system_name: n.clone(),
                ..FunctionInfo::default()
            },
            line: 0,
        })
        .collect();
    b.location(mapping_id, f.key, &lines)
}
