//! pprof's `profile.proto`, gzipped: what `go tool pprof` and most profilers' UIs read.
//!
//! The message structs below are the subset of `profile.proto` (github.com/google/pprof,
//! `proto/profile.proto`) this tool writes, declared by hand with `prost` so no `protoc` is needed;
//! field numbers are the proto's.
//!
//! Mapping from a dump: four sample types (`inuse_objects/count`, `inuse_space/bytes`,
//! `alloc_objects/count`, `alloc_space/bytes`), one sample per stack with the unbiased figures
//! rounded to integers, allocator frames removed as in the text report, one location per frame
//! address (the address jeprof symbolizes: callers minus one) with one line per function, innermost
//! (inlined) first, mappings from the dump's memory map, `period` = the sample period R.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use prost::Message;

use crate::names::SkipRules;
use crate::report::interesting_frames;
use crate::symbolize::{Frame, ResolvedProfile};

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbProfile {
    /// What each sample value is.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<PbValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<PbSample>,
    /// Memory mappings.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<PbMapping>,
    /// Locations (addresses).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<PbLocation>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<PbFunction>,
    /// Every string, index 0 being "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Kind of events between samples.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<PbValueType>,
    /// Events between samples.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form notes (string table indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string table index).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbValueType {
    /// Type name (string table index).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Unit (string table index).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbSample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
}

/// `Mapping`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbMapping {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// First address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// One past the last address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// File name (string table index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string table index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether every location in it has function names.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// `Location`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbLocation {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The instruction address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Functions at the address, innermost (inlined) first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<PbLine>,
}

/// `Line`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbLine {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbFunction {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Display name (string table index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Linker name (string table index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string table index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Rounds an unbiased figure to the integer pprof stores.
fn round(x: f64) -> i64 {
    if x.is_finite() {
        x.round() as i64
    } else {
        0
    }
}

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
    let mut strings = Strings::new();
    let mut pb = PbProfile::default();
    for (kind, unit) in [
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
    ] {
        pb.sample_type.push(PbValueType {
            r#type: strings.get(kind),
            unit: strings.get(unit),
        });
    }
    pb.period_type = Some(PbValueType {
        r#type: strings.get("space"),
        unit: strings.get("bytes"),
    });
    pb.default_sample_type = strings.get("inuse_space");
    pb.period = profiles
        .iter()
        .map(|p| p.sample_period)
        .filter(|&r| r > 0)
        .min()
        .unwrap_or(0) as i64;
    let mut functions: HashMap<String, u64> = HashMap::new();
    for profile in profiles {
        // Mappings of this dump, by index into `profile.mappings`.
        let mut mapping_ids: HashMap<usize, u64> = HashMap::new();
        let mut locations: HashMap<*const Frame, u64> = HashMap::new();
        for stack in &profile.stacks {
            let frames = interesting_frames(&stack.frames, skip);
            let mut ids = Vec::with_capacity(frames.len());
            for f in frames {
                let id = match locations.get(&Arc::as_ptr(f)) {
                    Some(&id) => id,
                    None => {
                        let mapping_id =
                            mapping_for(profile, f, &mut mapping_ids, &mut pb, &mut strings);
                        let id = pb.location.len() as u64 + 1;
                        if !f.symbolized && mapping_id != 0 {
                            // Let pprof symbolize it from the mapping's file, if it can.
                            pb.mapping[mapping_id as usize - 1].has_functions = false;
                        }
                        let names: &[String] = if f.symbolized { &f.names } else { &[] };
                        let line = names
                            .iter()
                            .map(|n| {
                                let next = functions.len() as u64 + 1;
                                let fid = *functions.entry(n.clone()).or_insert_with(|| {
                                    let name = strings.get(n);
                                    pb.function.push(PbFunction {
                                        id: next,
                                        name,
                                        system_name: name,
                                        filename: 0,
                                    });
                                    next
                                });
                                PbLine {
                                    function_id: fid,
                                    line: 0,
                                }
                            })
                            .collect();
                        pb.location.push(PbLocation {
                            id,
                            mapping_id,
                            address: f.key,
                            line,
                        });
                        locations.insert(Arc::as_ptr(f), id);
                        id
                    }
                };
                ids.push(id);
            }
            let c = &stack.counts;
            pb.sample.push(PbSample {
                location_id: ids,
                value: vec![
                    round(c.inuse.objects),
                    round(c.inuse.bytes),
                    round(c.accum.objects),
                    round(c.accum.bytes),
                ],
            });
        }
    }
    pb.comment.push(strings.get(
        "written by jeprof-compat from jemalloc heap_v2 dumps; values are unbiased estimates",
    ));
    pb.string_table = strings.table;
    pb
}

fn mapping_for(
    profile: &ResolvedProfile,
    frame: &Frame,
    ids: &mut HashMap<usize, u64>,
    pb: &mut PbProfile,
    strings: &mut Strings,
) -> u64 {
    let i = profile.mappings.partition_point(|m| m.start <= frame.key);
    let Some(i) = i.checked_sub(1) else { return 0 };
    let m = &profile.mappings[i];
    if frame.key >= m.end || !m.executable {
        return 0;
    }
    *ids.entry(i).or_insert_with(|| {
        let id = pb.mapping.len() as u64 + 1;
        pb.mapping.push(PbMapping {
            id,
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: m.offset,
            filename: strings.get(&m.path),
            build_id: 0,
            // Until a location without names shows up in it.
            has_functions: true,
        });
        id
    })
}

/// Encodes and gzips `profile`.
pub fn write_gz(profile: &PbProfile, out: impl Write) -> std::io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?.flush()
}

/// Reads back a gzipped profile (for tests and checks).
pub fn read_gz(bytes: &[u8]) -> Result<PbProfile, crate::Error> {
    use std::io::Read;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .map_err(crate::Error::Gzip)?;
    PbProfile::decode(raw.as_slice()).map_err(crate::Error::Protobuf)
}
