//! Names from the program and the shared libraries a raw dump's memory map names (DWARF with
//! inlined frames, then the symbol table, through `addr2line`), PIE-aware: jeprof's `nm` and
//! `addr2line` runs, read in-process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jeprof_dumpfmt::maps::{self, Mapping};
use jeprof_dumpfmt::SourceLine;

use crate::names::{self, NameStyle};

/// How to find names for raw dumps.
#[derive(Debug, Clone, Default)]
pub struct SymbolizeOptions {
    /// The program that wrote the dump (jeprof's first argument).
    pub binary: Option<PathBuf>,
    /// How names are shown.
    pub style: NameStyle,
}

/// The binaries of one raw dump, each opened on first use: what names its addresses.
pub(crate) struct Binaries<'a> {
    options: &'a SymbolizeOptions,
    mappings: &'a [Mapping],
    /// Loaded object files by path (`None`: could not be read).
    objects: HashMap<PathBuf, Option<ObjectFile>>,
}

impl<'a> Binaries<'a> {
    pub(crate) fn new(options: &'a SymbolizeOptions, mappings: &'a [Mapping]) -> Binaries<'a> {
        Binaries {
            options,
            mappings,
            objects: HashMap::new(),
        }
    }

    /// The names at lookup key `key` (demangled, innermost first) with their source positions
    /// ([`ObjectFile::names_at`]), or, when nothing names it, whether jeprof prints it with `0x`
    /// ([`super::unnamed`]).
    ///
    /// An address inside an executable mapping is looked up in that mapping's file (`--binary`
    /// stands in for the mapping whose file name matches it, so a program copied elsewhere still
    /// resolves); an address outside every mapping is looked up in `--binary` as is (jeprof's
    /// catch-all, right for non-PIE programs).
    pub(crate) fn names_at(
        &mut self,
        key: u64,
    ) -> Result<(Vec<String>, Vec<Option<SourceLine>>), bool> {
        // jeprof prints `0x<key>` when it ran its tools on a program (every address falls in its
        // catch-all entry for the program), the bare key when there was nothing to look in.
        let has_binary = self.options.binary.is_some();
        let unknown = || Err(has_binary);
        let (path, file_offset) = match maps::find(self.mappings, key) {
            Some(m)
                if m.is_file()
                    && self
                        .options
                        .binary
                        .as_deref()
                        .is_some_and(|b| same_file_name(b, &m.path)) =>
            {
                let binary = self.options.binary.clone().unwrap_or_default();
                (binary, Some(m.file_offset(key)))
            }
            // jeprof reads only shared libraries from the map (and the program it is given).
            Some(m) if is_shared_library(&m.path) => {
                (PathBuf::from(&m.path), Some(m.file_offset(key)))
            }
            _ => match &self.options.binary {
                Some(b) => (b.clone(), None),
                None => return unknown(),
            },
        };
        let object = self
            .objects
            .entry(path.clone())
            .or_insert_with(|| ObjectFile::open(&path));
        let Some(object) = object else {
            return unknown();
        };
        let probe = match file_offset {
            Some(off) => object.vaddr_of_file_offset(off),
            None => Some(key),
        };
        probe.and_then(|p| object.names_at(p)).ok_or(true)
    }
}

/// jeprof's test for a library in the memory map: `.so`, `.dll`, `.dylib` or `.bundle`, with
/// optional version suffixes.
pub(crate) fn is_shared_library(path: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"\.(so|dll|dylib|bundle)((\.\d+)+\w*(\.\d+){0,3})?$")
            .expect("static regex")
    })
    .is_match(path)
}

pub(crate) fn same_file_name(binary: &Path, mapped: &str) -> bool {
    if Path::new(mapped) == binary {
        return true;
    }
    if let Ok(abs) = std::fs::canonicalize(binary) {
        if Path::new(mapped) == abs {
            return true;
        }
    }
    binary.file_name().and_then(|n| n.to_str())
        == Path::new(mapped).file_name().and_then(|n| n.to_str())
}

/// An object file opened for symbolization.
struct ObjectFile {
    loader: addr2line::Loader,
    /// `(file offset, file size, virtual address)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// `(virtual address, size)` of each executable section: only addresses inside one are looked
    /// up, or the symbol table would name a far-away address after the last symbol before it.
    code: Vec<(u64, u64)>,
}

impl ObjectFile {
    fn open(path: &Path) -> Option<ObjectFile> {
        use object::{Object, ObjectSection, ObjectSegment, SectionKind};
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let code = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .map(|s| (s.address(), s.size()))
            .collect();
        let loader = addr2line::Loader::new(path).ok()?;
        Some(ObjectFile {
            loader,
            segments,
            code,
        })
    }

    fn vaddr_of_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| offset >= *off && offset < off + size)
            .map(|(off, _, vaddr)| offset - off + vaddr)
    }

    /// Function names at `probe`, innermost first: DWARF (with inlined functions), else the symbol
    /// table; and, when DWARF has any, the source position of each (each inlined function's is
    /// where it was when inlined, as addr2line -i prints), else no positions.
    fn names_at(&self, probe: u64) -> Option<(Vec<String>, Vec<Option<SourceLine>>)> {
        if !self.code.iter().any(|&(a, n)| probe >= a && probe - a < n) {
            return None;
        }
        let mut names = Vec::new();
        let mut lines = Vec::new();
        if let Ok(mut frames) = self.loader.find_frames(probe) {
            while let Ok(Some(frame)) = frames.next() {
                if let Some(f) = frame.function {
                    if let Ok(raw) = f.raw_name() {
                        names.push(names::demangle(&raw));
                        lines.push(frame.location.and_then(|l| {
                            Some(SourceLine {
                                file: l.file?.to_string(),
                                line: l.line?,
                            })
                        }));
                    }
                }
            }
        }
        if names.is_empty() {
            names.push(names::demangle(self.loader.find_symbol(probe)?));
            lines.clear();
        }
        if lines.iter().all(Option::is_none) {
            lines.clear();
        }
        Some((names, lines))
    }
}
