//! From a dump's addresses to function names: its `--- symbol` section, or (for raw dumps) the
//! program and libraries named in its memory map, read with `addr2line` (DWARF with inlined frames,
//! then the symbol table), PIE-aware.
//!
//! Every frame gets the key jeprof looks it up by (`FixCallerAddresses`: the leaf as written, callers
//! minus one) and, when its mapping is known, `(module, file offset)`, which stays the same across
//! processes of one build whatever ASLR did.

use std::collections::HashMap;
use std::hash::Hasher as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hashbrown::hash_table::{Entry, HashTable};
use jeprof_dumpfmt::model::symbol_key;
use jeprof_dumpfmt::{Counts, Profile, SourceLine};

use crate::hash::{FastHasher, FastMap};
use crate::maps::{self, Mapping};
use crate::names::{self, NameStyle};

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
}

/// How to find names for raw dumps.
#[derive(Debug, Clone, Default)]
pub struct SymbolizeOptions {
    /// The program that wrote the dump (jeprof's first argument).
    pub binary: Option<PathBuf>,
    /// How names are shown.
    pub style: NameStyle,
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
pub fn resolve(mut profile: Profile, source: &str, options: &SymbolizeOptions) -> ResolvedProfile {
    let labels = std::mem::take(&mut profile.labels);
    let mappings = profile
        .mapped_libraries
        .as_deref()
        .map(maps::parse_maps)
        .unwrap_or_default();
    if let Some(symbols) = profile.symbols.as_ref() {
        let stacks = resolve_symbolized(&profile, symbols, &mappings, options.style);
        return ResolvedProfile {
            source: source.to_string(),
            sample_period: profile.sample_period,
            stacks,
            mappings,
            labels,
        };
    }
    let mut resolver = Resolver {
        options,
        mappings: &mappings,
        objects: HashMap::new(),
        cache: FastMap::default(),
    };
    let stacks = profile
        .stacks
        .iter()
        .map(|s| ResolvedStack {
            frames: s
                .frames
                .iter()
                .enumerate()
                .map(|(i, &a)| resolver.frame(symbol_key(i, a)))
                .collect(),
            counts: s.counts,
        })
        .collect();
    drop(resolver);
    ResolvedProfile {
        source: source.to_string(),
        sample_period: profile.sample_period,
        stacks,
        mappings,
        labels,
    }
}

/// Elements in each chunk of a [`Chunks`] but the last.
const CHUNK: usize = 1 << 14;

/// An append-only list kept in chunks of [`CHUNK`] elements, so that growing never copies or frees
/// what is there. A `Vec` doubles, leaving its old buffer to the allocator, which keeps it
/// resident for reuse: for the lists of a dump of a million stacks, tens of megabytes of a
/// report's peak. The first chunk grows as a `Vec` does (a small dump stays small).
#[derive(Debug)]
pub(crate) struct Chunks<T> {
    /// Every chunk but the last holds exactly `CHUNK` elements.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunks<T> {
    fn default() -> Chunks<T> {
        Chunks {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunks<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(value),
            _ => {
                let mut chunk = if self.chunks.is_empty() {
                    Vec::new()
                } else {
                    Vec::with_capacity(CHUNK)
                };
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Element `i` (below `len`).
    pub(crate) fn get(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    pub(crate) fn iter(&self) -> std::iter::Flatten<std::slice::Iter<'_, Vec<T>>> {
        self.chunks.iter().flatten()
    }
}

impl<'a, T> IntoIterator for &'a Chunks<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A dump's jeprof lookup keys ([`symbol_key`]) as dense local indexes: the first pass of every
/// symbolized fast path (report, resolve, merge), and what a text report keeps of a dump's stacks
/// while it reads them. Walking the stacks' frame lists once gives each distinct key an index in
/// first-seen order (`keys[i]` is index i's key) and turns the frames into indexes in one flat list
/// (stack j takes the next `lens[j]` entries): 4 bytes a frame and 4 a stack, plus about 13 a
/// distinct key, where a `Vec<u64>` per stack costs 24 bytes and 8 a frame. [`KeyIndex::named`] then
/// walks the symbol section in its own order (sequential memory, where lookups in stack order would
/// miss the cache on every entry).
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    /// Indexes into `keys`, hashed by the key they hold (4 bytes a slot; a map from key to index
    /// would hold each key a second time).
    local_of: HashTable<u32>,
    pub(crate) keys: Chunks<u64>,
    pub(crate) flat: Vec<u32>,
    pub(crate) lens: Chunks<u32>,
}

fn hash_key(key: u64) -> u64 {
    let mut hasher = FastHasher::default();
    hasher.write_u64(key);
    hasher.finish()
}

impl KeyIndex {
    /// Rebuilds the index for `profile`, leaving out the keys for which `keep` is false.
    pub(crate) fn rebuild(&mut self, profile: &Profile, keep: impl Fn(u64) -> bool) {
        *self = KeyIndex::default();
        self.expect_symbolized(profile);
        for stack in &profile.stacks {
            self.push_stack(&stack.frames, &keep);
        }
    }

    /// Sizes the key lookup once for a dump with a symbol section, which names (about) every key
    /// its stacks have, rather than growing it key by key.
    pub(crate) fn expect_symbolized(&mut self, profile: &Profile) {
        if let Some(symbols) = &profile.symbols {
            let keys = &self.keys;
            self.local_of
                .reserve(symbols.names.len(), |&l| hash_key(*keys.get(l as usize)));
        }
    }

    /// Adds a stack (frame addresses as the dump gives them), leaving out the keys for which
    /// `keep` is false.
    pub(crate) fn push_stack(&mut self, frames: &[u64], keep: impl Fn(u64) -> bool) {
        let before = self.flat.len();
        for (i, &address) in frames.iter().enumerate() {
            let k = symbol_key(i, address);
            if !keep(k) {
                continue;
            }
            let local = self.intern(k);
            self.flat.push(local);
        }
        // A stack is one line of at most `MAX_LINE` (16 MiB) bytes, so far fewer than 2^32 frames.
        self.lens.push((self.flat.len() - before) as u32);
    }

    fn intern(&mut self, key: u64) -> u32 {
        let keys = &self.keys;
        let entry = self.local_of.entry(
            hash_key(key),
            |&l| *keys.get(l as usize) == key,
            |&l| hash_key(*keys.get(l as usize)),
        );
        match entry {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let local = self.keys.len() as u32;
                e.insert(local);
                self.keys.push(key);
                local
            }
        }
    }

    /// The local index of `key`, if a stack has it.
    fn local(&self, key: u64) -> Option<u32> {
        self.local_of
            .find(hash_key(key), |&l| *self.keys.get(l as usize) == key)
            .copied()
    }

    /// Frees what only finding a key's index needs, once every index is known.
    pub(crate) fn forget_lookup(&mut self) {
        self.local_of = HashTable::new();
    }

    /// The symbol-section entries with names for keys of this index, in the section's order, as
    /// `(local index, key, raw names)`; stops once every key has been found.
    pub(crate) fn named<'s, 't: 's>(
        &'s self,
        table: &'t std::collections::BTreeMap<u64, Vec<String>>,
    ) -> impl Iterator<Item = (u32, u64, &'t [String])> + 's {
        table
            .iter()
            .filter(|(_, raw)| !raw.is_empty())
            .filter_map(move |(&k, raw)| Some((self.local(k)?, k, raw.as_slice())))
            // Each key is in the section once: stop once every key has been found.
            .take(self.keys.len())
    }

    /// The stacks of the indexed profile as slices of the flat list, in order.
    pub(crate) fn stacks(&self) -> impl Iterator<Item = &[u32]> + '_ {
        let mut start = 0;
        self.lens.iter().map(move |&len| {
            let len = len as usize;
            let stack = &self.flat[start..start + len];
            start += len;
            stack
        })
    }
}

/// [`resolve`] for a dump with a symbol section, the way `merge::Accumulator::add_dump` walks one:
/// every distinct lookup key gets a dense local index (the stacks' frame lists are walked once),
/// the symbol section is walked in its own order (sequential memory, where lookups in stack order
/// miss the cache on every entry), each distinct entry of raw names is demangled and cleaned once
/// per dump, and each distinct key gets one shared [`Frame`], exactly as the per-key cache of
/// [`Resolver::frame`] would build it.
fn resolve_symbolized(
    profile: &Profile,
    symbols: &jeprof_dumpfmt::SymbolTable,
    mappings: &[Mapping],
    style: NameStyle,
) -> Vec<ResolvedStack> {
    let table = &symbols.names;
    let mut index = KeyIndex::default();
    index.rebuild(profile, |_| true);
    let keys = &index.keys;
    // Module paths shared per mapping, names per distinct raw entry.
    let mut paths: FastMap<&str, Arc<str>> = FastMap::default();
    let mut module_of = |key: u64| {
        maps::find(mappings, key).filter(|m| m.is_file()).map(|m| {
            let path = paths
                .entry(m.path.as_str())
                .or_insert_with(|| Arc::from(m.path.as_str()))
                .clone();
            (path, m.file_offset(key))
        })
    };
    let mut named: FastMap<&[String], (Vec<String>, Vec<String>)> = FastMap::default();
    let mut frames: Vec<Option<Arc<Frame>>> = vec![None; keys.len()];
    for (local, key, raw) in index.named(table) {
        let (full_names, names) = named
            .entry(raw)
            .or_insert_with(|| {
                let full: Vec<String> = raw.iter().map(|s| names::demangle(s)).collect();
                let short = full.iter().map(|s| names::clean(s, style)).collect();
                (full, short)
            })
            .clone();
        // Kept only when it fits the names (a section whose `# line` lines disagree with its
        // names tells nothing reliable).
        let lines = symbols
            .lines
            .get(&key)
            .filter(|l| l.len() == names.len())
            .cloned()
            .unwrap_or_default();
        frames[local as usize] = Some(Arc::new(Frame {
            key,
            names,
            full_names,
            symbolized: true,
            module: module_of(key),
            lines,
        }));
    }
    let frames: Vec<Arc<Frame>> = frames
        .into_iter()
        .zip(keys)
        .map(|(f, &key)| {
            f.unwrap_or_else(|| {
                let full_names = vec![unnamed(key, true)];
                Arc::new(Frame {
                    key,
                    names: full_names.clone(),
                    full_names,
                    symbolized: false,
                    module: module_of(key),
                    lines: Vec::new(),
                })
            })
        })
        .collect();
    profile
        .stacks
        .iter()
        .zip(index.stacks())
        .map(|(s, locals)| ResolvedStack {
            frames: locals.iter().map(|&l| frames[l as usize].clone()).collect(),
            counts: s.counts,
        })
        .collect()
}

struct Resolver<'a> {
    options: &'a SymbolizeOptions,
    mappings: &'a [Mapping],
    /// Loaded object files by path (`None`: could not be read).
    objects: HashMap<PathBuf, Option<ObjectFile>>,
    cache: FastMap<u64, Arc<Frame>>,
}

/// Names for the addresses of a raw dump (no symbol section), one address at a time, as
/// [`resolve`] gives its frames, without keeping a [`Frame`] per address (a text report needs the
/// names once; [`resolve`] keeps every frame, which for a million distinct addresses is hundreds of
/// megabytes).
pub(crate) struct RawNames<'a> {
    resolver: Resolver<'a>,
}

impl<'a> RawNames<'a> {
    pub(crate) fn new(options: &'a SymbolizeOptions, mappings: &'a [Mapping]) -> RawNames<'a> {
        RawNames {
            resolver: Resolver {
                options,
                mappings,
                objects: HashMap::new(),
                cache: FastMap::default(),
            },
        }
    }

    /// The names at lookup key `key` and their source lines, as [`Frame::names`] and
    /// [`Frame::lines`] hold them when [`Frame::symbolized`], or, when nothing names it, whether
    /// its name ([`unnamed`]) has `0x`.
    pub(crate) fn names(
        &mut self,
        key: u64,
    ) -> Result<(Vec<String>, Vec<Option<SourceLine>>), bool> {
        let mapping = maps::find(self.resolver.mappings, key);
        let (full_names, lines) = self.resolver.lookup_raw(key, mapping)?;
        Ok((self.resolver.clean(&full_names), lines))
    }
}

impl Resolver<'_> {
    fn clean(&self, full_names: &[String]) -> Vec<String> {
        full_names
            .iter()
            .map(|s| names::clean(s, self.options.style))
            .collect()
    }

    fn frame(&mut self, key: u64) -> Arc<Frame> {
        if let Some(f) = self.cache.get(&key) {
            return f.clone();
        }
        let mapping = maps::find(self.mappings, key);
        let module = mapping
            .filter(|m| m.is_file())
            .map(|m| (Arc::<str>::from(m.path.as_str()), m.file_offset(key)));
        // Dumps with a symbol section go through `resolve_symbolized`; this resolver reads binaries.
        let (full_names, lines, symbolized) = match self.lookup_raw(key, mapping) {
            Ok((names, lines)) => (names, lines, true),
            Err(prefixed) => (vec![unnamed(key, prefixed)], Vec::new(), false),
        };
        let names = if symbolized {
            self.clean(&full_names)
        } else {
            full_names.clone()
        };
        let frame = Arc::new(Frame {
            key,
            names,
            full_names,
            symbolized,
            module,
            lines,
        });
        self.cache.insert(key, frame.clone());
        frame
    }

    /// The names at `key` in the binaries with their source positions ([`ObjectFile::names_at`]),
    /// or, when nothing names it, whether jeprof prints it with `0x` ([`unnamed`]).
    fn lookup_raw(
        &mut self,
        key: u64,
        mapping: Option<&Mapping>,
    ) -> Result<(Vec<String>, Vec<Option<SourceLine>>), bool> {
        // jeprof prints `0x<key>` when it ran its tools on a program (every address falls in its
        // catch-all entry for the program), the bare key when there was nothing to look in.
        let has_binary = self.options.binary.is_some();
        let unknown = || Err(has_binary);
        let (path, file_offset) = match mapping {
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
