//! From a dump's addresses to function names: its `--- symbol` section, or (for raw dumps) the
//! program and libraries named in its memory map and their debug files, read in-process (DWARF
//! with inlined frames, then the symbol tables, as jeprof's `addr2line` and `nm` runs would name
//! them, or by the project's stricter rule), PIE-aware.
//!
//! Every frame gets the key jeprof looks it up by (`FixCallerAddresses`: the leaf as written, callers
//! minus one) and, when its mapping is known, `(module, file offset)`, which stays the same across
//! processes of one build whatever ASLR did.
//!
//! Layers, bottom to top: `elf_tables` (an object's sections, `.symtab`, `.dynsym` with
//! versions, build id and debuglink, and binutils' two lookups: BFD's nearest function and
//! jeprof's nm boundaries), [`debug_files`] (debug files by build id and by debuglink, in the
//! system debug directory and `--debug-dir`, and the build ids of object files), `tools` (one
//! object's names under jeprof's rule and the project's, [`NameRule`]), `binaries` (what a raw
//! dump's program, libraries and debug files name), `keys`
//! (the translation engine: each distinct key of a dump named once, the pass [`resolve`], the
//! merge and the text report share), and here [`resolve`], which gives every key a [`Frame`].

mod binaries;
pub mod debug_files;
mod elf_tables;
pub(crate) mod keys;
mod tools;

use std::sync::Arc;

use jeprof_dumpfmt::build_ids::{self, BuildId};
use jeprof_dumpfmt::maps::Mapping;
use jeprof_dumpfmt::{Counts, Profile, SourceLine};

pub(crate) use binaries::{is_shared_library, same_file_name};
pub use binaries::{NameRule, SymbolizeOptions};
pub use debug_files::{check_debug_dirs, MissingDebugFile, OnMissing};

use crate::hash::FastMap;
use crate::input::MemoryMap;
use crate::names::{self, NameStyle};
use keys::{name_keys, EntryLines, Found, KeyIndex, KeyNames};

/// One frame of a resolved stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The address jeprof looks the frame up by (callers already minus one).
    pub key: u64,
    /// Function names at this address, innermost (inlined) first, the containing function last.
    /// When nothing is known this holds one name: the address as jeprof prints it.
    pub names: Vec<String>,
    /// The same names before shortening (C++ argument lists kept): what `--collapsed` prints, as
    /// jeprof prints full names there.
    pub full_names: Vec<String>,
    /// Whether `names` are real function names (jeprof only skips allocator frames that are).
    pub symbolized: bool,
    /// The mapped file and the file offset of `key`, when the dump's memory map covers it.
    pub module: Option<(Arc<str>, u64)>,
    /// The source position of each of `names`, in the same order (innermost first) and of the same
    /// length when any is known, else empty: from the binary's DWARF (inlined functions each with
    /// their own line) for raw dumps, from the `# line` lines of the symbol section for symbolized
    /// ones ([`jeprof_dumpfmt::SymbolTable::lines`]).
    pub lines: Vec<Option<SourceLine>>,
}

impl Frame {
    /// The source position of `names[i]`, if known.
    pub fn line(&self, i: usize) -> Option<&SourceLine> {
        self.lines.get(i).and_then(Option::as_ref)
    }

    /// The containing (outermost) function: what jeprof's skip list is matched against.
    pub fn function(&self) -> &str {
        self.names.last().map_or("", String::as_str)
    }

    /// The name this frame merges under across processes and builds: its function names where it
    /// has some, else `module+0xoffset`, else the address.
    pub fn identity(&self) -> Vec<String> {
        if self.symbolized {
            return self.names.clone();
        }
        vec![unsymbolized_identity(
            self.key,
            self.module
                .as_ref()
                .map(|(path, offset)| (&**path, *offset)),
        )]
    }
}

/// The identity of a frame without names: `module+0xoffset` (the file name of the mapped file) when
/// its mapping is known, else the address.
pub(crate) fn unsymbolized_identity(key: u64, module: Option<(&str, u64)>) -> String {
    match module {
        Some((path, offset)) => {
            let file = path.rsplit('/').next().unwrap_or(path);
            format!("{file}+0x{offset:x}")
        }
        None => format!("0x{key:016x}"),
    }
}

/// The name jeprof prints for an address nothing names: its 16 hex digits, after `0x` when a
/// program or library was looked in (`prefixed`; always, for a dump with a symbol section).
pub(crate) fn unnamed(key: u64, prefixed: bool) -> String {
    if prefixed {
        format!("0x{key:016x}")
    } else {
        format!("{key:016x}")
    }
}

/// One stack of a resolved profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedStack {
    /// Frames, innermost first.
    pub frames: Vec<Arc<Frame>>,
    /// The entry's unbiased figures.
    pub counts: Counts,
}

/// A dump whose frames have names.
#[derive(Debug, Clone, Default)]
pub struct ResolvedProfile {
    /// Where it came from (for messages).
    pub source: String,
    /// The dump's sample period.
    pub sample_period: u64,
    /// Stacks, in the dump's order. Several entries may share frames (jeprof adds them up, and so
    /// does everything here).
    pub stacks: Vec<ResolvedStack>,
    /// The parsed memory map.
    pub mappings: Vec<Mapping>,
    /// The dump's labels ([`Profile::labels`]); none for a merge of several dumps.
    pub labels: Vec<(String, String)>,
    /// The build ids of its mapped files that the dump carries
    /// ([`jeprof_dumpfmt::build_ids`]); none for a merge of several dumps.
    pub build_ids: Vec<BuildId>,
}

/// Resolves every frame of `profile`.
///
/// - A dump with a symbol section: names from it; an address missing from it shows as
///   `0x<16 hex digits>`, as jeprof shows it.
/// - A raw dump: each address inside an executable mapping is looked up in that mapping's file
///   (`--binary` stands in for the mapping whose file name matches it, so a program copied elsewhere
///   still resolves); an address outside every mapping is looked up in `--binary` as is (jeprof's
///   catch-all, right for non-PIE programs). Addresses nothing resolves show as the bare 16-digit
///   key, as jeprof with an empty program shows them.
///
/// Each distinct key gets one [`Frame`], shared by every stack that has it (`keys`' pass).
pub fn resolve(mut profile: Profile, source: &str, options: &SymbolizeOptions) -> ResolvedProfile {
    let labels = std::mem::take(&mut profile.labels);
    let map = MemoryMap::of(&profile);
    let mut index = KeyIndex::default();
    index.rebuild(&profile, |_| true);
    let mut maker = FrameMaker {
        style: options.style,
        rule: options.rule,
        map: &map,
        paths: FastMap::default(),
        entries: FastMap::default(),
        frames: Vec::with_capacity(index.keys.len()),
    };
    let ids = name_keys(&profile, &mut index, options, &map, &mut maker);
    let frames = maker.into_frames();
    let stacks = profile
        .stacks
        .iter()
        .zip(index.stacks())
        .map(|(s, locals)| ResolvedStack {
            frames: locals
                .iter()
                .map(|&l| frames[ids[l as usize] as usize].clone())
                .collect(),
            counts: s.counts,
        })
        .collect();
    drop(frames);
    ResolvedProfile {
        source: source.to_string(),
        sample_period: profile.sample_period,
        stacks,
        mappings: map.into_mappings(),
        labels,
        build_ids: build_ids::from_annotations(&profile.annotations),
    }
}

/// [`resolve`]'s side of the pass: a [`Frame`] per key, each distinct symbol-section entry's
/// names demangled and cleaned once per dump, each mapped file's path held once.
struct FrameMaker<'p, 'm> {
    style: NameStyle,
    rule: NameRule,
    map: &'m MemoryMap<'p>,
    paths: FastMap<&'m str, Arc<str>>,
    /// A symbol-section entry's full and clean names.
    entries: FastMap<&'p [String], (Vec<String>, Vec<String>)>,
    frames: Vec<Arc<Frame>>,
}

impl FrameMaker<'_, '_> {
    fn into_frames(self) -> Vec<Arc<Frame>> {
        self.frames
    }

    fn module(&mut self, key: u64) -> Option<(Arc<str>, u64)> {
        let (path, offset) = self.map.module(key)?;
        let path = self
            .paths
            .entry(path)
            .or_insert_with(|| Arc::from(path))
            .clone();
        Some((path, offset))
    }

    fn push(&mut self, frame: Frame) -> u32 {
        self.frames.push(Arc::new(frame));
        (self.frames.len() - 1) as u32
    }
}

impl<'p> KeyNames<'p> for FrameMaker<'p, '_> {
    fn entry(&mut self, key: u64, raw: &'p [String], lines: EntryLines<'p>) -> u32 {
        let style = self.style;
        let (full_names, names) = self
            .entries
            .entry(raw)
            .or_insert_with(|| {
                // [`keys::entry_names`], keeping the demangled names too.
                let full: Vec<String> = raw.iter().map(|s| names::demangle(s)).collect();
                let short = full.iter().map(|s| names::clean(s, style)).collect();
                (full, short)
            })
            .clone();
        let module = self.module(key);
        self.push(Frame {
            key,
            names,
            full_names,
            symbolized: true,
            module,
            lines: lines.get().to_vec(),
        })
    }

    fn found(&mut self, key: u64, found: Found) -> u32 {
        let module = self.module(key);
        self.push(Frame {
            key,
            names: found.names,
            full_names: found.full_names,
            symbolized: true,
            module,
            lines: found.lines,
        })
    }

    fn unnamed(&mut self, key: u64, prefixed: bool) -> u32 {
        let module = self.module(key);
        // jeprof's form where its rule holds; the project's own views name the object and the
        // offset in it when the mapping is known, else `0x` and the 16 digits.
        let full_names = match self.rule {
            NameRule::Jeprof => vec![unnamed(key, prefixed)],
            NameRule::Sized => vec![unsymbolized_identity(
                key,
                module.as_ref().map(|(path, offset)| (&**path, *offset)),
            )],
        };
        self.push(Frame {
            key,
            names: full_names.clone(),
            full_names,
            symbolized: false,
            module,
            lines: Vec::new(),
        })
    }
}
