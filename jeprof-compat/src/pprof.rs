//! pprof output from dumps: this tool resolves names (symbol sections, binaries, demangling) and
//! source lines, removes allocator frames and charges flat as the text report does; [`jeprof_dumpfmt::pprof`] encodes.
//!
//! Mapping from a dump: the four heap sample types, one sample per stack with the unbiased figures
//! rounded to integers and the dump's labels (and `--label`s) as string labels, one location per frame address (the address jeprof symbolizes: callers
//! minus one) with one line per function, innermost (inlined) first, mappings from the dump's memory
//! map, `period` = the sample period R (the smallest, for several dumps).
//!
//! What `go tool pprof` needs to read it as well as our text report:
//! - Frames removed as the text report removes them: jeprof's allocator frames, and the allocator
//!   functions Rust inlines into the leaf address (`<Profiled<A> as GlobalAlloc>::alloc`,
//!   `__rust_alloc`), which pprof would otherwise charge every byte to.
//! - The [`Attribution`]: pprof charges flat to a sample's first line, so the functions `--hide`
//!   passes over at the leaf are left out of the sample (a location keeps the lines that remain,
//!   under its own id), and `--show_from` drops lines toward the root, as pprof's own options do.
//! - Function names whole and distinct: `Function.name` as the text report shows it;
//!   `system_name` the name before C++ shortening where that differs, else empty. The symbols this
//!   tool reads are already demangled, so no mangled name is kept, and pprof "demangles" (cuts
//!   `<&dyn Fn<()> as FnOnce<()>>::call_once` down to `::call_once`) a function whose system name
//!   is its name. `filename` and each line's number where the symbol section or the binary's
//!   DWARF knows them ([`Frame::lines`]); `start_line` is not known.
//! - Mappings with the mapped file's GNU build id, the one the dump carries (jeprof-shim's) or
//!   else the file's where it can be read here, claiming
//!   functions, file names and line numbers only where every location in them has them, so pprof
//!   re-symbolizes only what we could not.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use jeprof_dumpfmt::pprof::{read_gz, write_gz, PbProfile};
use jeprof_dumpfmt::pprof::{Builder, FunctionInfo, Header, LineInfo, MappingInfo};

use crate::attribution::Attribution;
use crate::input::ReadPolicy;
use crate::named_input::load_all;
use crate::names::SkipRules;
use crate::report::{allocator_names_inlined, interesting_frames};
use crate::symbolize::debug_files::read_build_id;
use crate::symbolize::{same_file_name, Frame, ResolvedProfile};

/// How [`build_with`] removes frames, charges flat and finds build ids.
#[derive(Debug, Clone, Default)]
pub struct PprofOptions {
    /// Which allocator frames are removed.
    pub skip: SkipRules,
    /// Which function flat is charged to, and which are shown.
    pub attribution: Attribution,
    /// The program (`--binary`): it stands in for the mapping whose file has its name, as in
    /// symbolization, for that mapping's build id.
    pub binary: Option<PathBuf>,
    /// String labels put on every sample (`--label KEY=VALUE`), after each dump's own labels
    /// ([`ResolvedProfile::labels`]), replacing a dump's label of the same key.
    pub labels: Vec<(String, String)>,
}

/// Reads dump files (in parallel, whole: pprof's locations need every stack resolved) and builds
/// their pprof message added together ([`build_with`]). Errors name the file and line.
pub fn build_files(
    paths: &[PathBuf],
    symbolize: &crate::symbolize::SymbolizeOptions,
    options: &PprofOptions,
    policy: &ReadPolicy<'_>,
) -> Result<PbProfile, crate::error::Error> {
    let profiles = load_all(paths, symbolize, policy)?;
    Ok(build_with(&profiles, options))
}

/// [`build_with`] charging flat as jeprof does (no [`Attribution`]).
pub fn build(profiles: &[ResolvedProfile], skip: SkipRules) -> PbProfile {
    build_with(
        profiles,
        &PprofOptions {
            skip,
            ..PprofOptions::default()
        },
    )
}

/// Builds the pprof message for `profiles` added together (their stacks are concatenated; pprof
/// adds samples with the same locations), frames removed and flat charged as the text report
/// does under `options`.
pub fn build_with(profiles: &[ResolvedProfile], options: &PprofOptions) -> PbProfile {
    let (skip, attribution) = (options.skip, &options.attribution);
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
    let mut build_ids = BuildIds {
        binary: options.binary.as_deref(),
        by_path: HashMap::new(),
    };
    for profile in profiles {
        let mut encoder = StackEncoder {
            profile,
            skip,
            attribution,
            mappings: HashMap::new(),
            functions: HashMap::new(),
        };
        // The program's own mapping first, whether or not a sample is in it: pprof, Parca and
        // Pyroscope take the first mapping for the program.
        if let Some(i) = program_mapping(profile) {
            encoder.mapping(&mut b, &mut build_ids, i);
        }
        // Every sample of a dump carries its labels, so a scraper that stores many processes'
        // profiles (Parca, Pyroscope) can select by them.
        let mut labels = profile.labels.clone();
        for (k, v) in &options.labels {
            jeprof_dumpfmt::labels::set(&mut labels, k, v);
        }
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for stack in &profile.stacks {
            let frames = interesting_frames(&stack.frames, skip);
            let ids = encoder.locations(&mut b, &mut build_ids, frames);
            b.sample(ids, &stack.counts, &labels);
        }
    }
    b.finish()
}

/// One function of a stack as pprof gets it: the frame it is in and its index in the frame's
/// names (`None` for a frame nothing names, which stays a location without lines).
#[derive(Clone, Copy)]
struct FunctionAt<'f> {
    frame: &'f Arc<Frame>,
    index: Option<usize>,
}

impl FunctionAt<'_> {
    /// The name `--hide` and `--show_from` match (none for an unnamed frame: as in the text
    /// report, an address is never hidden nor a `--show_from` match).
    fn name(&self) -> Option<&str> {
        self.index.map(|i| self.frame.names[i].as_str())
    }
}

/// Encodes the stacks of one dump, its frames' mappings and functions made once each.
struct StackEncoder<'p> {
    profile: &'p ResolvedProfile,
    skip: SkipRules,
    attribution: &'p Attribution,
    /// Mapping id per mapping index in `profile.mappings`.
    mappings: HashMap<usize, u64>,
    /// Per frame and name index: its [`LineInfo`] (frames are shared between a dump's stacks).
    functions: HashMap<(*const Frame, usize), LineInfo>,
}

impl StackEncoder<'_> {
    /// The location ids of a stack of `frames` (past the allocator skip), leaf first.
    fn locations(
        &mut self,
        b: &mut Builder,
        build_ids: &mut BuildIds,
        frames: &[Arc<Frame>],
    ) -> Vec<u64> {
        // Every function of the stack, innermost first.
        let mut functions: Vec<FunctionAt<'_>> = Vec::with_capacity(frames.len() + 4);
        for frame in frames {
            if frame.symbolized {
                let first = allocator_names_inlined(frame, self.skip);
                functions.extend((first..frame.names.len()).map(|i| FunctionAt {
                    frame,
                    index: Some(i),
                }));
            } else {
                functions.push(FunctionAt { frame, index: None });
            }
        }
        let attribution = self.attribution;
        let cut = attribution.cut(
            functions.len(),
            |i| functions[i].name().is_some_and(|n| attribution.hides(n)),
            |i| {
                functions[i]
                    .name()
                    .is_some_and(|n| attribution.shows_from(n))
            },
        );
        // The kept functions grouped back into locations, one per run of one frame's functions.
        let kept = &functions[cut.flat..cut.shown];
        let mut ids = Vec::with_capacity(frames.len());
        let mut start = 0;
        while start < kept.len() {
            let frame = kept[start].frame;
            let mut end = start;
            while end < kept.len() && Arc::ptr_eq(kept[end].frame, frame) {
                end += 1;
            }
            let lines: Vec<LineInfo> = kept[start..end]
                .iter()
                .filter_map(|f| Some(self.line(f.frame, f.index?)))
                .collect();
            ids.push(self.location(b, build_ids, frame, &lines));
            start = end;
        }
        ids
    }

    /// The [`LineInfo`] of name `index` of `frame`.
    fn line(&mut self, frame: &Arc<Frame>, index: usize) -> LineInfo {
        self.functions
            .entry((Arc::as_ptr(frame), index))
            .or_insert_with(|| {
                let source = frame.line(index);
                let name = &frame.names[index];
                // pprof "demangles" a function whose system name equals its name, and cuts a
                // demangled-looking one down to `::call_once`: a system name is only given
                // where it says something the name does not.
                let system_name = frame
                    .full_names
                    .get(index)
                    .filter(|full| *full != name)
                    .cloned()
                    .unwrap_or_default();
                LineInfo {
                    function: FunctionInfo {
                        name: name.clone(),
                        system_name,
                        filename: source.map(|s| s.file.clone()).unwrap_or_default(),
                        start_line: 0,
                    },
                    line: source.map_or(0, |s| i64::from(s.line)),
                }
            })
            .clone()
    }

    fn location(
        &mut self,
        b: &mut Builder,
        build_ids: &mut BuildIds,
        frame: &Frame,
        lines: &[LineInfo],
    ) -> u64 {
        let mappings = &self.profile.mappings;
        let mapping_id = match mappings
            .partition_point(|m| m.start <= frame.key)
            .checked_sub(1)
            .filter(|&i| frame.key < mappings[i].end && mappings[i].executable)
        {
            Some(i) => self.mapping(b, build_ids, i),
            None => 0,
        };
        b.location(mapping_id, frame.key, lines)
    }

    /// The id of mapping `i` of the dump (made on first use). The program's own is shown by the
    /// name it was started as ([`started_as`]).
    fn mapping(&mut self, b: &mut Builder, build_ids: &mut BuildIds, i: usize) -> u64 {
        let profile = self.profile;
        *self.mappings.entry(i).or_insert_with(|| {
            let m = &profile.mappings[i];
            let file = match program_mapping(profile) {
                Some(p) if p == i => started_as(&m.path, &profile.labels),
                _ => None,
            };
            b.mapping(&MappingInfo {
                start: m.start,
                limit: m.end,
                offset: m.offset,
                file: file.unwrap_or_else(|| m.path.clone()),
                build_id: match profile.build_ids.iter().find(|b| b.path == m.path) {
                    Some(b) => b.id.clone(),
                    None => build_ids.of(&m.path),
                },
            })
        })
    }
}

/// The index of the dump's program mapping ([`jeprof_dumpfmt::maps::program_mapping`]): the file
/// with the build id of the dump's `build_id` label, else pprof's guess.
fn program_mapping(profile: &ResolvedProfile) -> Option<usize> {
    let id = profile
        .labels
        .iter()
        .find(|(k, _)| k == "build_id")
        .map(|(_, v)| v);
    let file = id.and_then(|id| profile.build_ids.iter().find(|b| b.id == *id));
    let m =
        jeprof_dumpfmt::maps::program_mapping(&profile.mappings, file.map(|b| b.path.as_str()))?;
    profile.mappings.iter().position(|x| std::ptr::eq(x, m))
}

/// The path the program was started by, when the dump's `program` label (that name, as
/// jeprof-shim writes it) differs from the mapped file's and names the same file beside it here:
/// `/usr/bin/redis-server` for a mapped `/usr/bin/redis-check-rdb` it links to. Else `None` (the
/// mapped path is shown).
fn started_as(mapped: &str, labels: &[(String, String)]) -> Option<String> {
    let (_, program) = labels.iter().find(|(k, _)| k == "program")?;
    let mapped = Path::new(mapped);
    if mapped.file_name()? == program.as_str() || program.contains('/') {
        return None;
    }
    let candidate = mapped.parent()?.join(program);
    let same = std::fs::canonicalize(&candidate).ok()? == std::fs::canonicalize(mapped).ok()?;
    same.then(|| candidate.display().to_string())
}

/// GNU build ids of mapped files, read once per path (empty where the file cannot be read here,
/// or has none).
struct BuildIds<'b> {
    /// `--binary`, read for the mapping with its file name.
    binary: Option<&'b Path>,
    by_path: HashMap<String, String>,
}

impl BuildIds<'_> {
    fn of(&mut self, mapped: &str) -> String {
        let binary = self.binary;
        self.by_path
            .entry(mapped.to_string())
            .or_insert_with(|| {
                let file = match binary {
                    Some(b) if same_file_name(b, mapped) => b,
                    _ if mapped.starts_with('/') => Path::new(mapped),
                    // `[vdso]`, anonymous mappings.
                    _ => return String::new(),
                };
                read_build_id(file).unwrap_or_default()
            })
            .clone()
    }
}
