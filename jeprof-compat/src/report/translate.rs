//! The text report's names: each function's name held once ([`Names`]), and each distinct frame
//! translated once ([`Translator`]: the charging engine's allocator-frame test
//! ([`jeprof_dumpfmt::charge::classify`]), `--focus`, `--ignore`,
//! `--retain`/`--exclude`, and `TranslateStack`'s functions), in flat arrays that a dump of a
//! million distinct addresses can afford. [`KeyInfos`] is the report's side of the translation
//! engine ([`crate::symbolize::keys`]).

use std::hash::Hasher as _;

use hashbrown::hash_table::{Entry, HashTable};
use jeprof_dumpfmt::charge::{self, FrameClass, Object, Objects};
use jeprof_dumpfmt::SourceLine;
use regex::Regex;

use super::filters::{frame_matches, StackFilters};
use super::lines::{unnamed_with_line, with_line};
use super::model::FunctionName;
use crate::hash::{FastHasher, FastMap};
use crate::input::MemoryMap;
use crate::names::{NameStyle, SkipRules};
use crate::symbolize::keys::{entry_names, EntryLines, Found, KeyNames, LAST_USER_ADDRESS};
use crate::symbolize::{unnamed, unsymbolized_identity, Frame};

/// What a [`Names`] entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NameKind {
    /// Spelled out in `text`: the entry is its index in `spelled_ends`.
    Text,
    /// An address nothing names (the entry), printed bare.
    Unnamed,
    /// An address nothing names (the entry), printed after `0x`.
    UnnamedPrefixed,
}

/// Function names, each stored once, with dense ids: spelled-out ones end to end in one buffer,
/// addresses nothing names as the address (a raw dump of a million distinct addresses without its
/// program has a million of those). A `String` per name (24 bytes and an allocation), held again
/// as the key of a map from name to id, would be most of a report's memory.
#[derive(Default)]
pub(super) struct Names {
    kinds: Vec<NameKind>,
    /// Per name, by kind: the index of its end in `spelled_ends`, or the address.
    entries: Vec<u64>,
    text: String,
    /// Spelled-out name `i` is `text[spelled_ends[i - 1]..spelled_ends[i]]` (from 0 for the first).
    spelled_ends: Vec<usize>,
    /// The ids, hashed by their printed names.
    ids: HashTable<u32>,
}

fn hash_name(name: FunctionName<'_>) -> u64 {
    let mut hasher = FastHasher::default();
    hasher.write(name.bytes(&mut [0; 18]));
    hasher.finish()
}

/// The parts of a [`Names`] that [`Names::get`] reads (borrowed apart from its `ids`).
#[derive(Clone, Copy)]
struct NameParts<'n> {
    kinds: &'n [NameKind],
    entries: &'n [u64],
    text: &'n str,
    spelled_ends: &'n [usize],
}

impl<'n> NameParts<'n> {
    fn get(self, id: u32) -> FunctionName<'n> {
        let (kind, entry) = (self.kinds[id as usize], self.entries[id as usize]);
        match kind {
            NameKind::Text => {
                let i = entry as usize;
                let start = if i == 0 { 0 } else { self.spelled_ends[i - 1] };
                FunctionName::Text(&self.text[start..self.spelled_ends[i]])
            }
            NameKind::Unnamed => FunctionName::Unnamed {
                key: entry,
                prefixed: false,
            },
            NameKind::UnnamedPrefixed => FunctionName::Unnamed {
                key: entry,
                prefixed: true,
            },
        }
    }
}

impl Names {
    pub(super) fn len(&self) -> usize {
        self.kinds.len()
    }

    fn parts(&self) -> NameParts<'_> {
        NameParts {
            kinds: &self.kinds,
            entries: &self.entries,
            text: &self.text,
            spelled_ends: &self.spelled_ends,
        }
    }

    pub(super) fn get(&self, id: u32) -> FunctionName<'_> {
        self.parts().get(id)
    }

    /// The id of `name` (of any name that prints the same), a new one on first sight.
    fn intern(&mut self, name: FunctionName<'_>) -> u32 {
        let parts = NameParts {
            kinds: &self.kinds,
            entries: &self.entries,
            text: &self.text,
            spelled_ends: &self.spelled_ends,
        };
        let entry = self.ids.entry(
            hash_name(name),
            |&id| parts.get(id) == name,
            |&id| hash_name(parts.get(id)),
        );
        match entry {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                let id = self.kinds.len() as u32;
                e.insert(id);
                match name {
                    FunctionName::Text(text) => {
                        self.kinds.push(NameKind::Text);
                        self.entries.push(self.spelled_ends.len() as u64);
                        self.text.push_str(text);
                        self.spelled_ends.push(self.text.len());
                    }
                    FunctionName::Unnamed { key, prefixed } => {
                        self.kinds.push(if prefixed {
                            NameKind::UnnamedPrefixed
                        } else {
                            NameKind::Unnamed
                        });
                        self.entries.push(key);
                    }
                }
                id
            }
        }
    }

    /// Frees what only [`Names::intern`] needs, once every name is known.
    pub(super) fn forget_lookup(&mut self) {
        self.ids = HashTable::new();
    }
}

/// Per distinct frame, what the report needs of it: whether it is an allocator frame the report
/// removes (the charging engine's [`FrameClass`]: string tests, so computed once), whether it
/// matches `--focus`, and its translated function ids; in flat arrays (a dump of a million
/// distinct addresses has a million of these).
#[derive(Default)]
pub(super) struct Infos {
    pub(super) class: Vec<FrameClass>,
    /// Empty without `--focus`.
    pub(super) focus: Vec<bool>,
    /// Whether `--ignore` matches the frame; empty without `--ignore`.
    pub(super) ignore: Vec<bool>,
    /// Whether `--retain`/`--exclude` drop the frame; empty without them.
    pub(super) dropped: Vec<bool>,
    /// Info `i`'s function ids are `ids[ends[i - 1]..ends[i]]` (from 0 for the first).
    ends: Vec<usize>,
    ids: Vec<u32>,
}

impl Infos {
    /// Room for `frames` more infos of one id each (the usual), and their `--focus` flags.
    fn reserve(&mut self, frames: usize, focus: bool) {
        self.class.reserve(frames);
        self.ends.reserve(frames);
        self.ids.reserve(frames);
        if focus {
            self.focus.reserve(frames);
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn ids(&self, info: u32) -> &[u32] {
        let i = info as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.ids[start..self.ends[i]]
    }
}

/// Interned function names, and each frame's translated names (`TranslateStack`), computed once per
/// distinct frame.
#[derive(Default)]
pub(super) struct Translator {
    pub(super) names: Names,
    /// `--ignore`, `--retain`, `--exclude`: flags in `infos` for each frame.
    pub(super) filters: StackFilters,
    /// `--lines`: functions are interned with their source lines.
    pub(super) lines: bool,
    /// [`build`]'s frames: each distinct frame's dense index into `infos` (one hash lookup per
    /// frame of a stack).
    slots: FastMap<*const Frame, u32>,
    pub(super) infos: Infos,
    /// A name being made (`… (inline)`), reused.
    scratch: String,
}

impl Translator {
    /// A translator for a report with these `--ignore`/`--retain`/`--exclude` filters, at
    /// `--lines` or not.
    pub(super) fn new(filters: StackFilters, lines: bool) -> Translator {
        Translator {
            filters,
            lines,
            ..Translator::default()
        }
    }

    /// Room for the infos of `frames` distinct frames: sized once, rather than doubled, as every
    /// doubling leaves the old buffer behind in the allocator's free memory, counted in the
    /// process's size until it is reused or returned. (Names are not reserved for: a dump's
    /// frames can name as many new functions as they are, or none.)
    pub(super) fn reserve(&mut self, frames: usize, focus: bool) {
        self.infos.reserve(frames, focus);
    }

    /// The dense index of a frame, translating it on first sight.
    pub(super) fn slot(
        &mut self,
        f: &std::sync::Arc<Frame>,
        skip: SkipRules,
        focus: Option<&Regex>,
    ) -> u32 {
        let key = std::sync::Arc::as_ptr(f);
        if let Some(&slot) = self.slots.get(&key) {
            return slot;
        }
        let object = f
            .module
            .as_ref()
            .map_or(Object::Other, |(path, _)| charge::object_of(path));
        let slot = self.push_info(&f.names, &f.lines, f.symbolized, f.key, object, skip, focus);
        self.slots.insert(key, slot);
        slot
    }

    /// Adds the info of a frame with these names (innermost first, as [`Frame::names`] holds
    /// them) at lookup key `key`, inside `object`: whether it is an allocator frame, whether it
    /// matches `focus`
    /// (its 16-digit key or one of its names, as jeprof's `--focus`), and its translated
    /// functions; returns its index in `infos`.
    #[allow(clippy::too_many_arguments)]
    fn push_info<S: AsRef<str>>(
        &mut self,
        names: &[S],
        lines: &[Option<SourceLine>],
        symbolized: bool,
        key: u64,
        object: Object,
        skip: SkipRules,
        focus: Option<&Regex>,
    ) -> u32 {
        if let Some(focus) = focus {
            let matches = frame_matches(focus, key, names, lines);
            self.infos.focus.push(matches);
        }
        if self.filters.ignore.is_some() {
            let ignored = self.filters.ignores(key, names, lines);
            self.infos.ignore.push(ignored);
        }
        if self.filters.drops_frames() {
            let function = names.last().map_or("", AsRef::as_ref);
            let dropped = self.filters.drops_frame(function);
            self.infos.dropped.push(dropped);
        }
        let (mut names, mut lines) = (names, lines);
        if symbolized {
            // Rust inlines its allocation shims (and a profiler's `GlobalAlloc`) into the caller,
            // so one address can carry allocator names innermost and the caller's outermost: it
            // belongs to its innermost name that is not an allocator frame.
            let inlined = charge::inlined_allocator_names(names, skip);
            names = &names[inlined..];
            lines = lines.get(inlined..).unwrap_or_default();
        }
        let function = names.last().map(AsRef::as_ref).filter(|_| symbolized);
        let class = charge::classify(function, object, skip);
        if self.lines {
            // `name file:line` per name, the inlined ones `name (inline) file:line`, as
            // `TranslateStack` ([`with_line`]).
            let last = names.len().saturating_sub(1);
            let named: Vec<String> = (0..names.len())
                .map(|j| {
                    let line = lines.get(j).and_then(Option::as_ref);
                    let name = names[j].as_ref();
                    with_line(&charge::row_name(name, j < last), line)
                })
                .collect();
            if key <= LAST_USER_ADDRESS {
                for name in &named {
                    let id = self.names.intern(FunctionName::Text(name));
                    self.infos.ids.push(id);
                }
            }
        } else {
            self.translate(names, key);
        }
        self.infos.class.push(class);
        self.infos.ends.push(self.infos.ids.len());
        (self.infos.len() - 1) as u32
    }

    /// [`Translator::push_info`] for an address nothing names, whose one name is [`unnamed`]`(key,
    /// prefixed)`, inside `object`: interned as the address.
    fn push_unnamed(
        &mut self,
        key: u64,
        prefixed: bool,
        object: Object,
        skip: SkipRules,
        focus: Option<&Regex>,
    ) -> u32 {
        if let Some(focus) = focus {
            let matches =
                focus.is_match(&format!("{key:016x}")) || focus.is_match(&unnamed(key, prefixed));
            self.infos.focus.push(matches);
        }
        if self.filters.ignore.is_some() || self.filters.drops_frames() {
            let name = unnamed(key, prefixed);
            if self.filters.ignore.is_some() {
                let ignored = self.filters.ignores(key, &[&name], &[]);
                self.infos.ignore.push(ignored);
            }
            if self.filters.drops_frames() {
                self.infos.dropped.push(self.filters.drops_frame(&name));
            }
        }
        if key <= LAST_USER_ADDRESS {
            let id = if self.lines {
                let name = unnamed_with_line(key, prefixed);
                self.names.intern(FunctionName::Text(&name))
            } else {
                self.names.intern(FunctionName::Unnamed { key, prefixed })
            };
            self.infos.ids.push(id);
        }
        // Not symbolized: an allocator frame by its object only.
        self.infos.class.push(charge::classify(None, object, skip));
        self.infos.ends.push(self.infos.ids.len());
        (self.infos.len() - 1) as u32
    }

    /// Adds the functions at a frame to `infos.ids`, innermost first, all but the outermost
    /// suffixed ` (inline)`; none for an address above `0x7fffffffffffffff`, which jeprof drops.
    fn translate<S: AsRef<str>>(&mut self, names: &[S], key: u64) {
        if key > LAST_USER_ADDRESS {
            return;
        }
        let last = names.len().saturating_sub(1);
        for (j, n) in names.iter().map(AsRef::as_ref).enumerate() {
            if n.is_empty() {
                continue;
            }
            let id = if j < last {
                self.scratch.clear();
                self.scratch.push_str(n);
                self.scratch.push_str(charge::INLINE_SUFFIX);
                self.names.intern(FunctionName::Text(&self.scratch))
            } else {
                self.names.intern(FunctionName::Text(n))
            };
            self.infos.ids.push(id);
        }
    }
}

/// The function ids of a stack (given as frame slots, already past [`interesting_frames`]) after
/// `TranslateStack` and `ReduceProfile` (each once), innermost first.
pub(super) fn reduced_functions(infos: &Infos, slots: &[u32], out: &mut Vec<u32>) {
    out.clear();
    for &s in slots {
        for &id in infos.ids(s) {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
}

/// The text report's side of the translation engine ([`crate::symbolize::keys::name_keys`]): an
/// info of the [`Translator`] per key. Each distinct symbol-section entry gets one info, shared by
/// its keys, unless `--focus`, `--ignore` (which match the key too) or `--lines` (which names the
/// key's own lines) need one per key. A key's object (the allocator's, libc, other) comes from the
/// dump's memory map ([`Objects`]); an entry is shared per object.
pub(super) struct KeyInfos<'t, 'p> {
    translator: &'t mut Translator,
    skip: SkipRules,
    focus: Option<&'t Regex>,
    style: NameStyle,
    per_key: bool,
    objects: Objects,
    by_entry: FastMap<(&'p [String], Object), u32>,
    /// The dump's memory map, under the project's rule ([`crate::symbolize::NameRule::Sized`],
    /// which the caller checks): a frame nothing names is then `object+0xOFFSET` where a file is
    /// mapped.
    modules: Option<&'t MemoryMap<'t>>,
}

impl<'t> KeyInfos<'t, '_> {
    /// `objects` is the dump's allocator and libc mappings (none under jeprof's rules).
    pub(super) fn new(
        translator: &'t mut Translator,
        skip: SkipRules,
        focus: Option<&'t Regex>,
        style: NameStyle,
        objects: Objects,
        modules: Option<&'t MemoryMap<'t>>,
    ) -> Self {
        let per_key = focus.is_some() || translator.filters.ignore.is_some() || translator.lines;
        KeyInfos {
            translator,
            skip,
            focus,
            style,
            per_key,
            objects,
            by_entry: FastMap::default(),
            modules,
        }
    }
}

impl<'p> KeyNames<'p> for KeyInfos<'_, 'p> {
    fn entry(&mut self, key: u64, raw: &'p [String], lines: EntryLines<'p>) -> u32 {
        let (skip, focus, style) = (self.skip, self.focus, self.style);
        let object = self.objects.at(key);
        if key > LAST_USER_ADDRESS || self.per_key {
            // Dropped by `TranslateStack` (no functions interned), still an allocator frame or
            // not, and rare; or matched or named by its own key too: not shared.
            let names = entry_names(raw, style);
            return self
                .translator
                .push_info(&names, lines.get(), true, key, object, skip, focus);
        }
        let translator = &mut *self.translator;
        *self.by_entry.entry((raw, object)).or_insert_with(|| {
            translator.push_info(&entry_names(raw, style), &[], true, key, object, skip, None)
        })
    }

    fn found(&mut self, key: u64, found: Found) -> u32 {
        let object = self.objects.at(key);
        self.translator.push_info(
            &found.names,
            &found.lines,
            true,
            key,
            object,
            self.skip,
            self.focus,
        )
    }

    fn unnamed(&mut self, key: u64, prefixed: bool) -> u32 {
        let object = self.objects.at(key);
        if let Some(module) = self.modules.and_then(|m| m.module(key)) {
            let name = unsymbolized_identity(key, Some(module));
            return self.translator.push_info(
                &[name],
                &[],
                false,
                key,
                object,
                self.skip,
                self.focus,
            );
        }
        self.translator
            .push_unnamed(key, prefixed, object, self.skip, self.focus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_rust_allocator_shims_give_the_address_to_its_first_real_function() {
        // Innermost first: what a sampled `Vec` allocation's leaf address resolves to.
        let names = [
            "<jeprof_shim::Profiled<A> as core::alloc::global::GlobalAlloc>::alloc",
            "__rustc::__rust_alloc",
            "<alloc::alloc::Global>::alloc_impl",
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "my_app::fill",
        ];
        let functions = |skip: SkipRules| {
            let mut t = Translator::default();
            let info = t.push_info(&names, &[], true, 0x1000, Object::Other, skip, None);
            assert_eq!(t.infos.class[info as usize], FrameClass::Program);
            t.infos
                .ids(info)
                .iter()
                .map(|&id| t.names.get(id).to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            functions(SkipRules::default()),
            [
                "alloc::raw_vec::RawVecInner<A>::try_allocate_in (inline)",
                "my_app::fill"
            ]
        );
        // As jeprof does: every inlined name kept, the innermost one gets the flat figure.
        let kept = functions(SkipRules::JEPROF);
        assert_eq!(kept.len(), 5);
        assert!(kept[0].ends_with("GlobalAlloc>::alloc (inline)"));
    }
}
