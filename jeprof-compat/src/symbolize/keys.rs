//! The translation engine: from a dump's lookup keys to names, one pass that resolving a dump
//! ([`super::resolve`]), the merge ([`crate::merge::Accumulator::add_dump`]) and the text report
//! ([`crate::report::build_files`]) all take, so that they name every frame alike.
//!
//! 1. [`KeyIndex`]: each distinct lookup key of the dump's stacks ([`symbol_key`]: the leaf as
//!    written, callers minus one, jeprof's `FixCallerAddresses`) gets a dense local index, and the
//!    stacks become lists of those.
//! 2. [`name_keys`] names each key once: a dump with a symbol section is walked in the section's
//!    own order (sequential memory, where lookups in stack order miss the cache on every entry),
//!    and a key the section does not name is an address printed after `0x`; a raw dump's keys are
//!    looked up in the binaries its memory map names ([`Binaries`]).
//! 3. The caller ([`KeyNames`]) turns what names a key into its own id (a [`super::Frame`], a
//!    merge's frame identity, a report's translated functions), caching per symbol-section entry
//!    as it needs; an entry's names are demangled and cleaned the same way by each
//!    ([`entry_names`]).
//!
//! The property tests that the merge's and the report's results equal those of resolved dumps
//! (`tests/merge.rs`, `tests/streamed_reports.rs`, the merge's and the report's unit tests) are
//! this pass's proof that its three callers agree.

use std::collections::BTreeMap;
use std::hash::Hasher as _;

use hashbrown::hash_table::{Entry, HashTable};
use jeprof_dumpfmt::model::symbol_key;
use jeprof_dumpfmt::{Profile, SourceLine, SymbolTable};

use super::binaries::{Binaries, SymbolizeOptions};
use crate::hash::FastHasher;
use crate::input::MemoryMap;
use crate::names::{self, NameStyle};

/// Addresses above this (kernel addresses) are dropped by jeprof's `TranslateStack`, so from every
/// report, and left out of merges (their synthetic replacements would not be dropped).
pub(crate) const LAST_USER_ADDRESS: u64 = 0x7fff_ffff_ffff_ffff;

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

/// A dump's jeprof lookup keys ([`symbol_key`]) as dense local indexes: the first step of
/// [`name_keys`], and what a text report keeps of a dump's stacks
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
        table: &'t BTreeMap<u64, Vec<String>>,
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

/// What the caller of [`name_keys`] makes of each key: an id of its own (a dense index into what
/// it keeps), given what names the key.
pub(crate) trait KeyNames<'p> {
    /// `key` is named by the symbol-section entry `raw` (names as written, innermost first, not
    /// empty): its names are [`entry_names`] of `raw`, the same for every key with this entry.
    fn entry(&mut self, key: u64, raw: &'p [String], lines: EntryLines<'p>) -> u32;

    /// `key` of a raw dump is named by a binary.
    fn found(&mut self, key: u64, found: Found) -> u32;

    /// Nothing names `key`: its name is [`super::unnamed`]`(key, prefixed)`.
    fn unnamed(&mut self, key: u64, prefixed: bool) -> u32;
}

/// The names a binary gives a key of a raw dump.
pub(crate) struct Found {
    /// Demangled, innermost first ([`super::Frame::full_names`]).
    pub(crate) full_names: Vec<String>,
    /// The same, cleaned ([`super::Frame::names`]).
    pub(crate) names: Vec<String>,
    /// The source position of each name, or empty ([`super::Frame::lines`]).
    pub(crate) lines: Vec<Option<SourceLine>>,
}

/// The source positions of a symbol-section entry's names, looked up only by a caller that needs
/// them.
#[derive(Clone, Copy)]
pub(crate) struct EntryLines<'p> {
    symbols: &'p SymbolTable,
    key: u64,
    names: usize,
}

impl<'p> EntryLines<'p> {
    /// The position of each name, innermost first, from the section's `# line` lines
    /// ([`SymbolTable::lines`]); empty when it has none for the key, or when they do not fit the
    /// names (a section whose lines disagree with its names tells nothing reliable).
    pub(crate) fn get(self) -> &'p [Option<SourceLine>] {
        self.symbols
            .lines
            .get(&self.key)
            .filter(|l| l.len() == self.names)
            .map_or(&[], Vec::as_slice)
    }
}

/// A symbol-section entry's names as reports show them ([`super::Frame::names`]): each demangled,
/// then cleaned in `style`.
pub(crate) fn entry_names(raw: &[String], style: NameStyle) -> Vec<String> {
    raw.iter()
        .map(|s| names::clean(&names::demangle(s), style))
        .collect()
}

/// Names every key of `index` once, in the order described in the module doc, and returns the id
/// `names` gave each, by local index. `map` is `profile`'s memory map, parsed only if a raw dump's
/// binaries are looked in. For a raw dump, the index's lookup is freed first (keys are taken in
/// order).
pub(crate) fn name_keys<'p>(
    profile: &'p Profile,
    index: &mut KeyIndex,
    options: &SymbolizeOptions,
    map: &MemoryMap<'_>,
    names: &mut impl KeyNames<'p>,
) -> Vec<u32> {
    let Some(symbols) = &profile.symbols else {
        index.forget_lookup();
        let mut binaries = Binaries::new(options, map.mappings(), &profile.annotations);
        let ids = index
            .keys
            .iter()
            .map(|&key| match binaries.names_at(key) {
                Ok((full_names, lines)) => {
                    let cleaned = full_names
                        .iter()
                        .map(|s| names::clean(s, options.style))
                        .collect();
                    let found = Found {
                        full_names,
                        names: cleaned,
                        lines,
                    };
                    names.found(key, found)
                }
                Err(prefixed) => names.unnamed(key, prefixed),
            })
            .collect();
        if let Some(on_missing) = &options.on_missing {
            for missing in binaries.into_missing() {
                (on_missing.0)(&missing);
            }
        }
        return ids;
    };
    const UNNAMED: u32 = u32::MAX;
    let mut ids = vec![UNNAMED; index.keys.len()];
    for (local, key, raw) in index.named(&symbols.names) {
        let lines = EntryLines {
            symbols,
            key,
            names: raw.len(),
        };
        ids[local as usize] = names.entry(key, raw, lines);
    }
    // A key the section does not name: jeprof looked it up in the section, so prints `0x`.
    for (id, &key) in ids.iter_mut().zip(&index.keys) {
        if *id == UNNAMED {
            *id = names.unnamed(key, true);
        }
    }
    ids
}
