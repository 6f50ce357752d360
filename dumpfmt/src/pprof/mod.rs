//! pprof's `profile.proto`, gzipped: what `go tool pprof`, Parca, Pyroscope and most profilers' UIs
//! read. An adapter around the one [`Profile`] model, like the heap_v2 writer.
//!
//! A heap profile in pprof has four sample types, in this order: `inuse_objects/count`,
//! `inuse_space/bytes`, `alloc_objects/count`, `alloc_space/bytes` (Go's heap profile has the same
//! four; `inuse_space` is the default). Each value is the *unbiased* estimate of its stack rounded to
//! an integer — so summing samples in any tool is right — and `period` is the sample period R
//! (`period_type` `space/bytes`). Locations are the addresses jeprof symbolizes (the innermost
//! frame as written, callers minus one, which lands inside the call instruction), each with one
//! line per function at that address, innermost (inlined) first.
//!
//! Two ways in:
//! - [`from_profile`]: a [`Profile`] whose names come from its own symbol table (what the shim
//!   serves and writes); allocator frames are removed as [`crate::frames`] says.
//! - [`Builder`]: the interning builder under it, for producers that resolve names themselves
//!   (`jeprof-compat` symbolizes raw dumps from binaries and merges several dumps).

mod proto;
pub mod rss;

pub use proto::*;

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use crate::charge::{self, Objects, SkipRules};
use crate::error::Error;
use crate::maps::{self, Mapping};
use crate::model::{Counts, Profile};

/// The heap sample types, in the order every sample's values follow.
pub const SAMPLE_TYPES: [(&str, &str); 4] = [
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
];

/// The label of a sample that holds a scope's share of a stack ([`from_profile`]): the one label
/// that differs between samples of one process (the others name the process).
pub const SCOPE_LABEL: &str = "scope";

/// What a profile says about itself, beside its samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// The sample period R in bytes (the smallest one when several profiles are added together).
    pub period: u64,
    /// When the profile was taken, in nanoseconds since the Unix epoch (0: unknown).
    pub time_nanos: i64,
    /// The time the profile covers, for a window (0 for a point-in-time heap profile).
    pub duration_nanos: i64,
    /// The sample type shown by default: one of [`SAMPLE_TYPES`]' names (`inuse_space` if empty).
    pub default_sample_type: String,
    /// Free-form notes, shown by `go tool pprof -comments`.
    pub comments: Vec<String>,
    /// `key=value` labels put on every sample (program, build id, host name, service...), so that
    /// `-tagfocus` and scrapers' indexes can select by them; also listed in the comments.
    pub labels: Vec<(String, String)>,
}

/// A mapping as pprof describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct MappingInfo {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The mapped file.
    pub file: String,
    /// The file's build id (GNU build-id note, hex), empty when unknown.
    pub build_id: String,
}

/// A function as pprof describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FunctionInfo {
    /// The name shown (demangled, full: pprof shortens it for display only).
    pub name: String,
    /// The linker's (mangled) name; empty when unknown. Never `name` again: pprof takes a
    /// function whose system name is its name for one still to demangle, and its heuristic for
    /// names that "look demangled" strips every `<...>` and `(...)`, which turns Rust's
    /// `<&dyn Fn<()> as FnOnce<()>>::call_once` into `::call_once`, one name for many functions.
    pub system_name: String,
    /// Source file, empty when unknown.
    pub filename: String,
    /// First line of the function, 0 when unknown.
    pub start_line: i64,
}

/// A function at a location and the source line in it (0 when unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LineInfo {
    /// The function.
    pub function: FunctionInfo,
    /// The line.
    pub line: i64,
}

/// A location's identity: mapping id, address, and (function id, line) per line.
type LocationKey = (u64, u64, Vec<(u64, i64)>);

/// Builds one pprof message: interns strings, mappings, functions and locations (equal ones get
/// one id), and rounds each sample's unbiased figures.
#[derive(Debug)]
pub struct Builder {
    pb: PbProfile,
    strings: HashMap<String, i64>,
    mappings: HashMap<MappingInfo, u64>,
    functions: HashMap<FunctionInfo, u64>,
    locations: HashMap<LocationKey, u64>,
    sample_labels: Vec<PbLabel>,
}

impl Builder {
    /// A heap profile with `header`'s period, time, comments and labels, and the
    /// [`SAMPLE_TYPES`].
    pub fn new(header: &Header) -> Builder {
        Builder::with_sample_types(header, &SAMPLE_TYPES)
    }

    /// A profile with `header`'s period, time, comments and labels whose samples carry
    /// `sample_types` (`(type, unit)`, in the order of [`Builder::sample_values`]' values).
    pub fn with_sample_types(header: &Header, sample_types: &[(&str, &str)]) -> Builder {
        let mut b = Builder {
            pb: PbProfile::default(),
            strings: HashMap::new(),
            mappings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            sample_labels: Vec::new(),
        };
        b.string("");
        for &(kind, unit) in sample_types {
            let vt = PbValueType {
                r#type: b.string(kind),
                unit: b.string(unit),
            };
            b.pb.sample_type.push(vt);
        }
        b.pb.period_type = Some(PbValueType {
            r#type: b.string("space"),
            unit: b.string("bytes"),
        });
        b.pb.period = i64::try_from(header.period).unwrap_or(i64::MAX);
        b.pb.time_nanos = header.time_nanos;
        b.pb.duration_nanos = header.duration_nanos;
        let default = if header.default_sample_type.is_empty() {
            "inuse_space"
        } else {
            &header.default_sample_type
        };
        b.pb.default_sample_type = b.string(default);
        for c in &header.comments {
            let i = b.string(c);
            b.pb.comment.push(i);
        }
        for (k, v) in &header.labels {
            let i = b.string(&format!("{k}={v}"));
            b.pb.comment.push(i);
            let label = PbLabel {
                key: b.string(k),
                str: b.string(v),
                num: 0,
                num_unit: 0,
            };
            b.sample_labels.push(label);
        }
        b
    }

    /// The string table index of `s`.
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.pb.string_table.len() as i64;
        self.pb.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    /// The id of mapping `m` (added on first use). It starts out claiming functions, file names and
    /// line numbers for all its locations; [`Builder::location`] clears each claim that a location
    /// without them disproves, so pprof re-symbolizes only what we could not.
    pub fn mapping(&mut self, m: &MappingInfo) -> u64 {
        if let Some(&id) = self.mappings.get(m) {
            return id;
        }
        let id = self.pb.mapping.len() as u64 + 1;
        let filename = self.string(&m.file);
        let build_id = self.string(&m.build_id);
        self.pb.mapping.push(PbMapping {
            id,
            memory_start: m.start,
            memory_limit: m.limit,
            file_offset: m.offset,
            filename,
            build_id,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        self.mappings.insert(m.clone(), id);
        id
    }

    /// The id of function `f` (added on first use).
    pub fn function(&mut self, f: &FunctionInfo) -> u64 {
        if let Some(&id) = self.functions.get(f) {
            return id;
        }
        let id = self.pb.function.len() as u64 + 1;
        let name = self.string(&f.name);
        let system_name = self.string(&f.system_name);
        let filename = self.string(&f.filename);
        self.pb.function.push(PbFunction {
            id,
            name,
            system_name,
            filename,
            start_line: f.start_line,
        });
        self.functions.insert(f.clone(), id);
        id
    }

    /// The id of the location at `address` in mapping `mapping_id` (0: none) with `lines`,
    /// innermost first (empty: nothing is known, pprof may symbolize it from the mapping's file).
    pub fn location(&mut self, mapping_id: u64, address: u64, lines: &[LineInfo]) -> u64 {
        let ids: Vec<(u64, i64)> = lines
            .iter()
            .map(|l| (self.function(&l.function), l.line))
            .collect();
        let key = (mapping_id, address, ids);
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        if mapping_id != 0 {
            let m = &mut self.pb.mapping[mapping_id as usize - 1];
            m.has_functions &= !lines.is_empty();
            m.has_filenames &=
                !lines.is_empty() && lines.iter().all(|l| !l.function.filename.is_empty());
            m.has_line_numbers &= !lines.is_empty() && lines.iter().all(|l| l.line > 0);
        }
        let id = self.pb.location.len() as u64 + 1;
        self.pb.location.push(PbLocation {
            id,
            mapping_id,
            address,
            line: key
                .2
                .iter()
                .map(|&(function_id, line)| PbLine { function_id, line })
                .collect(),
            is_folded: false,
        });
        self.locations.insert(key, id);
        id
    }

    /// Adds a sample: `locations` leaf first, the unbiased `counts` rounded to integers, the header's
    /// labels and `labels`.
    pub fn sample(&mut self, locations: Vec<u64>, counts: &Counts, labels: &[(&str, &str)]) {
        let values = [
            counts.inuse.objects,
            counts.inuse.bytes,
            counts.accum.objects,
            counts.accum.bytes,
        ];
        self.sample_values(locations, &values, labels);
    }

    /// Adds a sample: `locations` leaf first, `values` (unbiased, one per sample type of
    /// [`Builder::with_sample_types`]) rounded to integers, the header's labels and `labels`.
    pub fn sample_values(&mut self, locations: Vec<u64>, values: &[f64], labels: &[(&str, &str)]) {
        let mut label = self.sample_labels.clone();
        for (k, v) in labels {
            let l = PbLabel {
                key: self.string(k),
                str: self.string(v),
                num: 0,
                num_unit: 0,
            };
            label.push(l);
        }
        self.pb.sample.push(PbSample {
            location_id: locations,
            value: values.iter().map(|&v| round(v)).collect(),
            label,
        });
    }

    /// The message.
    pub fn finish(self) -> PbProfile {
        self.pb
    }
}

/// Rounds an unbiased figure to the integer pprof stores (non-finite figures, which a valid profile
/// never has, become 0).
fn round(x: f64) -> i64 {
    if x.is_finite() {
        x.round() as i64
    } else {
        0
    }
}

/// How [`from_profile`] writes a profile.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Period, time, comments and labels (`header.period` 0: the profile's own period).
    pub header: Header,
    /// Which allocator frames to remove.
    pub skip: SkipRules,
    /// Build ids by mapped file path, for the mappings.
    pub build_ids: Vec<(String, String)>,
    /// The path shown as the program's own mapping's file (the first mapping, pprof's `File:`):
    /// the name the program was started by, where the caller found it names the mapped file
    /// (`/usr/bin/redis-server`, a link to `redis-check-rdb`); `None`, the mapped path.
    pub program_file: Option<String>,
}

/// The pprof message for `profile`, with names (and, where the table has them, source files and
/// lines) from its symbol table (a profile without one gives
/// locations without lines, which pprof symbolizes from the mappings' files if it can). Allocator
/// frames are removed as the charging engine says ([`charge::allocator_frames`], by name and by
/// the object an address lies in), so flat lands on the code that allocated.
pub fn from_profile(profile: &Profile, options: &Options) -> PbProfile {
    let mut header = options.header.clone();
    if header.period == 0 {
        header.period = profile.sample_period;
    }
    let mut b = Builder::new(&header);
    let locator = Locator::new(profile, options, &header, &mut b);
    // Per-scope figures by frames ([`Profile::scopes`]), each used once, at the first stack with
    // those frames.
    let mut scopes: HashMap<&[u64], Vec<&crate::model::ScopeStack>> = HashMap::new();
    for s in &profile.scopes {
        scopes.entry(&s.frames).or_default().push(s);
    }
    for stack in &profile.stacks {
        let ids = locator.locations(&mut b, &stack.frames);
        let by_scope = scopes.remove(stack.frames.as_slice()).unwrap_or_default();
        add_samples(&mut b, ids, stack.counts, by_scope);
    }
    b.finish()
}

/// A profile's stacks as pprof locations: its mappings, the objects they map (to tell
/// allocator frames), its symbol table, and the program's own mapping. One engine for every
/// profile [`from_profile`] and [`rss::from_profile_rss`] write.
struct Locator<'p> {
    profile: &'p Profile,
    options: &'p Options,
    mappings: Vec<Mapping>,
    objects: Objects,
    /// The start of the program's own mapping (mappings do not overlap).
    program: Option<u64>,
}

impl<'p> Locator<'p> {
    /// The locator of `profile`; adds the program's own mapping to `b` first, whether or not a
    /// sample is in it: readers take the first mapping for the program.
    fn new(
        profile: &'p Profile,
        options: &'p Options,
        header: &Header,
        b: &mut Builder,
    ) -> Locator<'p> {
        let mappings: Vec<Mapping> = profile
            .mapped_libraries
            .as_deref()
            .map(maps::parse_maps)
            .unwrap_or_default();
        let objects = Objects::from_mappings(&mappings);
        let program = program_mapping(&mappings, &header.labels, profile, &options.build_ids)
            .map(|m| m.start);
        let locator = Locator {
            profile,
            options,
            mappings,
            objects,
            program,
        };
        let program = program.and_then(|start| locator.mappings.iter().find(|m| m.start == start));
        if let Some(m) = program {
            b.mapping(&locator.mapping_info(m));
        }
        locator
    }

    /// The pprof description of mapping `m`.
    fn mapping_info(&self, m: &Mapping) -> MappingInfo {
        MappingInfo {
            start: m.start,
            limit: m.end,
            offset: m.offset,
            file: match &self.options.program_file {
                Some(shown) if self.program == Some(m.start) => shown.clone(),
                _ => m.path.clone(),
            },
            build_id: self
                .options
                .build_ids
                .iter()
                .find(|(path, _)| *path == m.path)
                .map(|(_, id)| id.clone())
                .unwrap_or_default(),
        }
    }

    /// The location ids of a stack of `frames` (leaf first), allocator frames removed as the
    /// charging engine says ([`charge::allocator_frames`]).
    fn locations(&self, b: &mut Builder, frames: &[u64]) -> Vec<u64> {
        let keys: Vec<u64> = frames
            .iter()
            .enumerate()
            .map(|(i, &a)| if i == 0 { a } else { a.wrapping_sub(1) })
            .collect();
        let names = self.profile.symbols.as_ref().map(|s| &s.names);
        let names_of = |key: u64| names.and_then(|n| n.get(&key));
        let start = charge::allocator_frames(keys.len(), |i| {
            charge::classify(
                names_of(keys[i]).and_then(|n| n.last()).map(String::as_str),
                self.objects.at(keys[i]),
                self.options.skip,
            )
        });
        let mut ids = Vec::with_capacity(keys.len() - start);
        for &key in &keys[start..] {
            let mapping_id = match maps::find(&self.mappings, key) {
                Some(m) => b.mapping(&self.mapping_info(m)),
                None => 0,
            };
            ids.push(b.location(mapping_id, key, &location_lines(self.profile, key)));
        }
        ids
    }
}

/// The lines of the location at `key`: each function the symbol table names there, innermost
/// first, with its file and line where the table has them.
fn location_lines(profile: &Profile, key: u64) -> Vec<LineInfo> {
    let Some(symbols) = profile.symbols.as_ref() else {
        return Vec::new();
    };
    let positions = symbols.lines.get(&key);
    symbols
        .names
        .get(&key)
        .map(|n| {
            n.iter()
                .enumerate()
                .map(|(i, name)| {
                    let at = positions.and_then(|p| p.get(i)).and_then(Option::as_ref);
                    LineInfo {
                        function: FunctionInfo {
                            name: name.clone(),
                            filename: at.map(|p| p.file.clone()).unwrap_or_default(),
                            ..FunctionInfo::default()
                        },
                        line: at.map_or(0, |p| i64::from(p.line)),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A stack's samples: its in-use figures split by scope, one sample labelled `scope=<label>` per
/// scope, and the rest (in-use of no scope, and everything allocated) without the label.
fn add_samples(
    b: &mut Builder,
    ids: Vec<u64>,
    counts: Counts,
    by_scope: Vec<&crate::model::ScopeStack>,
) {
    let mut rest = counts;
    let split = !by_scope.is_empty();
    for s in by_scope {
        let scoped = Counts {
            inuse: s.inuse,
            accum: crate::model::Estimate::default(),
        };
        b.sample(ids.clone(), &scoped, &[(SCOPE_LABEL, &s.scope)]);
        rest.inuse.objects = (rest.inuse.objects - s.inuse.objects).max(0.0);
        rest.inuse.bytes = (rest.inuse.bytes - s.inuse.bytes).max(0.0);
    }
    if !(split && rest.is_zero()) {
        b.sample(ids, &rest, &[]);
    }
}

/// The program's own executable mapping among `mappings` ([`maps::program_mapping`]): the file
/// whose build id (in `build_ids`, by mapped path) is the `build_id` label's (`labels`', else the
/// profile's), else pprof's guess.
fn program_mapping<'m>(
    mappings: &'m [Mapping],
    labels: &[(String, String)],
    profile: &Profile,
    build_ids: &[(String, String)],
) -> Option<&'m Mapping> {
    let id = [labels, profile.labels.as_slice()]
        .into_iter()
        .find_map(|labels| labels.iter().find(|(k, _)| k == "build_id"))
        .map(|(_, id)| id);
    let file = id.and_then(|id| build_ids.iter().find(|(_, b)| b == id));
    maps::program_mapping(mappings, file.map(|(path, _)| path.as_str()))
}

/// Encodes and gzips `profile` (what `go tool pprof` reads).
pub fn write_gz(profile: &PbProfile, out: impl Write) -> std::io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?.flush()
}

/// Reads back a gzipped profile.
pub fn read_gz(bytes: &[u8]) -> Result<PbProfile, Error> {
    use std::io::Read;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .map_err(|e| Error::Pprof(format!("not gzip data: {e}")))?;
    PbProfile::decode(raw.as_slice())
        .map_err(|e| Error::Pprof(format!("not a profile.proto message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Estimate, Stack, SymbolTable};

    fn estimate(objects: f64, bytes: f64) -> Estimate {
        Estimate {
            objects,
            bytes,
            ..Estimate::default()
        }
    }

    fn profile() -> Profile {
        let mut p = Profile::new(1 << 19);
        p.mapped_libraries = Some("1000-9000 r-xp 00000000 00:00 1 /usr/bin/prog\n".to_string());
        let mut names = std::collections::BTreeMap::new();
        names.insert(0x1100, vec!["__rust_alloc".to_string()]);
        names.insert(
            0x1200 - 1,
            vec!["inlined_leaf".to_string(), "user_fn".to_string()],
        );
        names.insert(0x1300 - 1, vec!["main".to_string()]);
        let mut lines = std::collections::BTreeMap::new();
        lines.insert(
            0x1200 - 1,
            vec![
                None,
                Some(crate::model::SourceLine {
                    file: "src/user.rs".into(),
                    line: 47,
                }),
            ],
        );
        p.symbols = Some(SymbolTable {
            binary: Some("/usr/bin/prog".into()),
            names,
            lines,
        });
        for (bytes, objects) in [(1_000_000.4, 2.0), (2_000_000.6, 3.0)] {
            p.stacks.push(Stack {
                frames: vec![0x1100, 0x1200, 0x1300],
                counts: Counts {
                    inuse: estimate(objects, bytes),
                    accum: estimate(objects * 2.0, bytes * 2.0),
                },
                threads: Vec::new(),
            });
        }
        p
    }

    fn function_name(pb: &PbProfile, location_id: u64, line: usize) -> &str {
        let loc = &pb.location[location_id as usize - 1];
        let f = &pb.function[loc.line[line].function_id as usize - 1];
        &pb.string_table[f.name as usize]
    }

    #[test]
    fn allocator_frames_are_removed_and_inlined_functions_kept_in_order() {
        let pb = from_profile(&profile(), &Options::default());
        let s = &pb.sample[0];
        assert_eq!(s.location_id.len(), 2, "__rust_alloc is gone");
        assert_eq!(function_name(&pb, s.location_id[0], 0), "inlined_leaf");
        assert_eq!(function_name(&pb, s.location_id[0], 1), "user_fn");
        assert_eq!(function_name(&pb, s.location_id[1], 0), "main");
        assert_eq!(pb.location[s.location_id[0] as usize - 1].address, 0x11ff);
        let user_line = &pb.location[s.location_id[0] as usize - 1].line[1];
        assert_eq!(
            user_line.line, 47,
            "the containing function's position is kept"
        );
        let user_fn = &pb.function[user_line.function_id as usize - 1];
        assert_eq!(pb.string_table[user_fn.filename as usize], "src/user.rs");
        assert_eq!(pb.location[s.location_id[0] as usize - 1].line[0].line, 0);
    }

    #[test]
    fn equal_locations_are_interned_and_values_are_rounded_estimates() {
        let pb = from_profile(&profile(), &Options::default());
        assert_eq!(pb.location.len(), 2);
        assert_eq!(pb.function.len(), 3);
        assert_eq!(pb.mapping.len(), 1);
        assert_eq!(pb.sample[0].value, vec![2, 1_000_000, 4, 2_000_001]);
        assert_eq!(pb.sample[1].value, vec![3, 2_000_001, 6, 4_000_001]);
        assert_eq!(pb.period, 1 << 19);
        let m = &pb.mapping[0];
        assert!(m.has_functions, "every location has names");
        assert!(!m.has_line_numbers, "no line is known");
    }

    #[test]
    fn a_stacks_scoped_figures_become_samples_labelled_with_their_scope() {
        let mut profile = Profile::new(512);
        let e = |bytes: f64| crate::Estimate {
            objects: bytes / 100.0,
            bytes,
            ..Default::default()
        };
        profile.stacks.push(crate::Stack {
            frames: vec![0x1000],
            counts: Counts {
                inuse: e(1000.0),
                accum: e(3000.0),
            },
            threads: Vec::new(),
        });
        profile.scopes.push(crate::ScopeStack {
            scope: "tenant-7".into(),
            frames: vec![0x1000],
            inuse: e(600.0),
        });
        let pb = from_profile(&profile, &Options::default());
        let s = |i: i64| pb.string_table[i as usize].as_str();
        assert_eq!(pb.sample.len(), 2);
        let scoped: Vec<_> = pb
            .sample
            .iter()
            .filter(|x| {
                x.label
                    .iter()
                    .any(|l| s(l.key) == "scope" && s(l.str) == "tenant-7")
            })
            .collect();
        assert_eq!(scoped.len(), 1);
        assert_eq!(scoped[0].value, vec![6, 600, 0, 0]);
        let total: Vec<i64> = (0..4)
            .map(|i| pb.sample.iter().map(|x| x.value[i]).sum())
            .collect();
        assert_eq!(total, vec![10, 1000, 30, 3000]);
    }

    #[test]
    fn header_labels_reach_every_sample_and_the_comments() {
        let options = Options {
            header: Header {
                time_nanos: 5,
                duration_nanos: 7,
                labels: vec![("service".into(), "api".into())],
                ..Header::default()
            },
            ..Options::default()
        };
        let pb = from_profile(&profile(), &options);
        let text = |i: i64| pb.string_table[i as usize].as_str();
        for s in &pb.sample {
            assert_eq!(s.label.len(), 1);
            assert_eq!(
                (text(s.label[0].key), text(s.label[0].str)),
                ("service", "api")
            );
        }
        assert!(pb.comment.iter().any(|&c| text(c) == "service=api"));
        assert_eq!((pb.time_nanos, pb.duration_nanos), (5, 7));
        assert_eq!(text(pb.default_sample_type), "inuse_space");
    }

    #[test]
    fn gzip_round_trip_gives_the_message_back() {
        let pb = from_profile(&profile(), &Options::default());
        let mut gz = Vec::new();
        write_gz(&pb, &mut gz).expect("writing to memory");
        assert_eq!(read_gz(&gz).expect("decodes"), pb);
        assert!(matches!(read_gz(b"not gzip"), Err(Error::Pprof(_))));
    }

    #[test]
    fn the_programs_own_mapping_comes_first_named_as_it_was_started() {
        // The only sample is in a library mapped above the program, as a preloaded redis's
        // libcrypto stacks were: pprof's `File:` must still be the program.
        let mut p = Profile::new(4096);
        p.mapped_libraries = Some(
            "1000-2000 r-xp 00000000 00:00 1 /usr/bin/redis-check-rdb\n\
             7000-8000 r-xp 00000000 00:00 2 /usr/lib/libcrypto.so.3\n"
                .to_string(),
        );
        p.stacks.push(crate::Stack {
            frames: vec![0x7100],
            counts: Counts {
                inuse: estimate(1.0, 4096.0),
                accum: estimate(1.0, 4096.0),
            },
            threads: Vec::new(),
        });
        let options = Options {
            header: Header {
                labels: vec![("build_id".into(), "aa01".into())],
                ..Header::default()
            },
            build_ids: vec![
                ("/usr/bin/redis-check-rdb".into(), "aa01".into()),
                ("/usr/lib/libcrypto.so.3".into(), "cc03".into()),
            ],
            program_file: Some("/usr/bin/redis-server".into()),
            ..Options::default()
        };
        let pb = from_profile(&p, &options);
        let text = |i: i64| pb.string_table[i as usize].as_str();
        let files: Vec<(&str, &str)> = pb
            .mapping
            .iter()
            .map(|m| (text(m.filename), text(m.build_id)))
            .collect();
        assert_eq!(
            files,
            [
                ("/usr/bin/redis-server", "aa01"),
                ("/usr/lib/libcrypto.so.3", "cc03")
            ]
        );
        assert_eq!(pb.mapping[0].id, 1);
        assert_eq!(
            pb.location[0].mapping_id, 2,
            "the sample stays in libcrypto"
        );
        // Without a build id label, pprof's guess: the first mapping that is not a library.
        let pb = from_profile(&p, &Options::default());
        assert_eq!(
            pb.string_table[pb.mapping[0].filename as usize],
            "/usr/bin/redis-check-rdb"
        );
    }
}
