//! Names from the program and the shared libraries a raw dump's memory map names, PIE-aware:
//! each object through [`super::tools::ObjectNames`] (its own tables and DWARF, else its debug
//! file in the system debug directory or a `--debug-dir`), by jeprof's rule or the project's
//! ([`NameRule`]); and a mapping whose build id has a debug file in a `--debug-dir` from that
//! file first ([`super::debug_files`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jeprof_dumpfmt::build_ids::{self, BuildId};
use jeprof_dumpfmt::maps::{self, Mapping};
use jeprof_dumpfmt::SourceLine;

use super::debug_files::{find_debug_file, read_build_id, MissingDebugFile, OnMissing};
use super::tools::{JeprofName, ObjectNames};
use crate::names::{self, NameStyle};

/// How to find names for raw dumps.
#[derive(Debug, Clone, Default)]
pub struct SymbolizeOptions {
    /// The program that wrote the dump (jeprof's first argument).
    pub binary: Option<PathBuf>,
    /// How names are shown.
    pub style: NameStyle,
    /// Directories of debug files by build id (`--debug-dir`, each holding
    /// `.build-id/xx/rest.debug`), looked in in order. A mapping whose build id has a debug file
    /// there is named from it (DWARF and symbols), whatever else names it.
    pub debug_dirs: Vec<PathBuf>,
    /// Told of each mapping holding frames whose build id has no debug file in `debug_dirs`
    /// (only when some are given).
    pub on_missing: Option<OnMissing>,
    /// Which rule names a frame of a raw dump that no DWARF function covers.
    pub rule: NameRule,
}

/// How a frame of a raw dump is named where DWARF names no function (jeprof-compat/README.md,
/// "Which names").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameRule {
    /// jeprof's: addr2line's nearest preceding function symbol, then nm's nearest preceding
    /// routine, whatever their sizes; an address past nm's last routine is `0x` and its 16
    /// digits, and one in an object nm lists nothing of is the bare 16 digits. The contract of
    /// jeprof-compatible output (`report`'s table and jeprof's views): what jeprof prints.
    #[default]
    Jeprof,
    /// The project's own views': a function symbol names only the addresses its size covers;
    /// past the end of every sized symbol a frame is `object+0xOFFSET` (the offset in the
    /// object file, as pprof's mappings count it), never a neighbour's name.
    Sized,
}

/// The binaries of one raw dump, each opened on first use: what names its addresses.
pub(crate) struct Binaries<'a> {
    options: &'a SymbolizeOptions,
    mappings: &'a [Mapping],
    /// The build ids the dump carries (jeprof-shim's `# build_id:` lines).
    dump_ids: Vec<BuildId>,
    /// Loaded object files by path (`None`: could not be read): debug files of `--debug-dir`.
    objects: HashMap<PathBuf, Option<ObjectFile>>,
    /// Programs and libraries by path, with their sources ([`ObjectNames`]).
    names: HashMap<PathBuf, Option<ObjectNames>>,
    /// Each mapped file's debug file (`None`: none found), looked for once.
    debug_files: HashMap<String, Option<PathBuf>>,
    /// `--binary`'s debug file, for the addresses outside every mapping.
    binary_debug_file: Option<Option<PathBuf>>,
    /// The mappings holding frames whose build id has no debug file, in the order met.
    missing: Vec<MissingDebugFile>,
}

impl<'a> Binaries<'a> {
    /// The binaries of a dump with memory map `mappings` and annotations `annotations` (where
    /// its build ids are).
    pub(crate) fn new(
        options: &'a SymbolizeOptions,
        mappings: &'a [Mapping],
        annotations: &[(String, String)],
    ) -> Binaries<'a> {
        let dump_ids = if options.debug_dirs.is_empty() {
            Vec::new()
        } else {
            build_ids::from_annotations(annotations)
        };
        Binaries {
            options,
            mappings,
            dump_ids,
            objects: HashMap::new(),
            names: HashMap::new(),
            debug_files: HashMap::new(),
            binary_debug_file: None,
            missing: Vec::new(),
        }
    }

    /// The names at lookup key `key` (demangled, innermost first) with their source positions
    /// ([`ObjectFile::names_at`]), or, when nothing names it, whether jeprof prints it with `0x`
    /// ([`super::unnamed`]).
    ///
    /// An address inside an executable mapping whose build id has a debug file (`--debug-dir`)
    /// is looked up there. Otherwise it is looked up in that mapping's file (`--binary` stands
    /// in for the mapping whose file name matches it, so a program copied elsewhere still
    /// resolves); an address outside every mapping is looked up in `--binary` (or its debug
    /// file) as is (jeprof's catch-all, right for non-PIE programs).
    pub(crate) fn names_at(
        &mut self,
        key: u64,
    ) -> Result<(Vec<String>, Vec<Option<SourceLine>>), bool> {
        // jeprof prints `0x<key>` when it ran its tools on a program (every address falls in its
        // catch-all entry for the program), the bare key when there was nothing to look in;
        // debug directories are looked in as a program would be.
        let options = self.options;
        // The project's own views always print `0x` and the 16 digits.
        let has_binary = options.binary.is_some()
            || !options.debug_dirs.is_empty()
            || options.rule == NameRule::Sized;
        let unknown = || Err(has_binary);
        let mapping = maps::find(self.mappings, key).filter(|m| m.is_file());
        if let Some(m) = mapping {
            if let Some(debug) = self.debug_file(m) {
                let mappings = self.mappings;
                let Some(object) = self.object(&debug) else {
                    return Err(true);
                };
                return object
                    .probe_in_mapping(mappings, m, key)
                    .and_then(|p| object.names_at(p))
                    .ok_or(true);
            }
        }
        let (path, file_offset) = match mapping {
            Some(m) if self.stand_in(m).is_some() => {
                let binary = options.binary.clone().unwrap_or_default();
                (binary, Some(m.file_offset(key)))
            }
            // jeprof reads only shared libraries from the map (and the program it is given).
            Some(m) if is_shared_library(&m.path) => {
                (PathBuf::from(&m.path), Some(m.file_offset(key)))
            }
            _ => match &options.binary {
                Some(b) => (self.binary_debug_file().unwrap_or_else(|| b.clone()), None),
                None => return unknown(),
            },
        };
        let rule = options.rule;
        let Some(object) = self.object_names(&path) else {
            // jeprof's tools print nothing for a file they cannot open.
            return Err(rule == NameRule::Sized);
        };
        let probe = match file_offset {
            Some(off) => object.tables().address_of_file_offset(off),
            None => Some(key),
        };
        let Some(probe) = probe else {
            return Err(true);
        };
        match rule {
            NameRule::Jeprof => match object.jeprof(probe) {
                JeprofName::Named(names, lines) => Ok((names, lines)),
                JeprofName::Address => Err(true),
                JeprofName::Bare => Err(false),
            },
            NameRule::Sized => object.sized(probe).ok_or(true),
        }
    }

    fn object_names(&mut self, path: &Path) -> Option<&ObjectNames> {
        let dirs = &self.options.debug_dirs;
        self.names
            .entry(path.to_path_buf())
            .or_insert_with(|| ObjectNames::open(path, dirs))
            .as_ref()
    }

    /// The mappings holding frames whose build id had no debug file, each once.
    pub(crate) fn into_missing(self) -> Vec<MissingDebugFile> {
        self.missing
    }

    fn object(&mut self, path: &Path) -> Option<&ObjectFile> {
        self.objects
            .entry(path.to_path_buf())
            .or_insert_with(|| ObjectFile::open(path))
            .as_ref()
    }

    /// `--binary` when it stands for mapping `m` (its file name).
    fn stand_in(&self, m: &Mapping) -> Option<&'a Path> {
        self.options
            .binary
            .as_deref()
            .filter(|b| same_file_name(b, &m.path))
    }

    /// The debug file of mapping `m` (by path, looked for once): by the build id the dump gives
    /// the path, else the one of the file standing for it (`--binary`, else the file at the
    /// mapped path, when there). A build id without a debug file is noted as missing.
    fn debug_file(&mut self, m: &Mapping) -> Option<PathBuf> {
        if self.options.debug_dirs.is_empty() {
            return None;
        }
        if let Some(found) = self.debug_files.get(&m.path) {
            return found.clone();
        }
        let id = match self.dump_ids.iter().find(|b| b.path == m.path) {
            Some(b) => Some(b.id.clone()),
            None => read_build_id(self.stand_in(m).unwrap_or(Path::new(&m.path))),
        };
        let found = id
            .as_deref()
            .and_then(|id| find_debug_file(&self.options.debug_dirs, id));
        if let (Some(id), None) = (id, &found) {
            self.missing.push(MissingDebugFile {
                path: m.path.clone(),
                build_id: id,
            });
        }
        self.debug_files.insert(m.path.clone(), found.clone());
        found
    }

    /// `--binary`'s debug file, by its build id (looked for once).
    fn binary_debug_file(&mut self) -> Option<PathBuf> {
        let options = self.options;
        self.binary_debug_file
            .get_or_insert_with(|| {
                let binary = options.binary.as_deref()?;
                if options.debug_dirs.is_empty() {
                    return None;
                }
                find_debug_file(&options.debug_dirs, &read_build_id(binary)?)
            })
            .clone()
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

/// A debug file of a `--debug-dir` opened for symbolization (DWARF with inlined frames, then its
/// symbol table), looked up through the segments of the mapping it stands for.
struct ObjectFile {
    loader: addr2line::Loader,
    /// `(file offset, file size, virtual address)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// The lowest virtual address of a loadable segment: the one at file offset 0.
    first_load: Option<u64>,
    /// `(virtual address, size)` of each executable section: only addresses inside one are looked
    /// up, or the symbol table would name a far-away address after the last symbol before it.
    code: Vec<(u64, u64)>,
}

impl ObjectFile {
    /// Opens the object file at `path`; its headers are read, its sections mapped by
    /// `addr2line` and read as lookups need them.
    fn open(path: &Path) -> Option<ObjectFile> {
        use object::{Object, ObjectSection, ObjectSegment, SectionFlags, SectionKind};
        let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
        let file = object::File::parse(&cache).ok()?;
        let segments: Vec<(u64, u64, u64)> = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let first_load = segments.iter().map(|&(_, _, vaddr)| vaddr).min();
        // A debug file's code sections hold no bytes (`SHT_NOBITS`), but keep their addresses
        // and their executable flag.
        let executable = |flags: SectionFlags| match flags {
            SectionFlags::Elf { sh_flags, .. } => sh_flags.0 & object::elf::SHF_EXECINSTR.0 != 0,
            _ => false,
        };
        let code = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text || executable(s.flags()))
            .map(|s| (s.address(), s.size()))
            .collect();
        let loader = addr2line::Loader::new(path).ok()?;
        Some(ObjectFile {
            loader,
            segments,
            first_load,
            code,
        })
    }

    /// The address in this object of `key`, inside mapping `m` of a process whose memory map is
    /// `mappings`: through the segment holding `m`'s file offset where this file has the
    /// segments' bytes; else (a debug file: `objcopy --only-keep-debug` keeps each segment's
    /// address but not its bytes) by the load bias, the start of the mapping of the same file at
    /// offset 0 less the lowest segment address (the first segment starts at file offset 0, so
    /// that mapping is its start): `key − bias`.
    fn probe_in_mapping(&self, mappings: &[Mapping], m: &Mapping, key: u64) -> Option<u64> {
        self.vaddr_of_file_offset(m.file_offset(key)).or_else(|| {
            let first = mappings
                .iter()
                .find(|x| x.path == m.path && x.offset == 0)?;
            let bias = first.start.checked_sub(self.first_load?)?;
            key.checked_sub(bias)
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
