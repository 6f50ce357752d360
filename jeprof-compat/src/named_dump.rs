//! `symbolize`: a raw dump (jemalloc's, or jeprof-shim's with `symbolize:false`) made into one
//! that carries its names, as a heap_v2 dump with a `--- symbol` section that jeprof reads
//! without a binary. Names come from the translation engine every report uses
//! ([`crate::symbolize`]): debug files found by build id (`--debug-dir`), `--binary`, and the
//! shared libraries the memory map names.
//!
//! The output keeps everything else of the dump (its figures, per-thread lines, memory map,
//! annotations, labels, scopes); the figures go through the writer's encoding, so jeprof's
//! figures from the output equal those from the input within the rounding the format allows
//! ([`jeprof_dumpfmt::write`]). Each name is written whole (demangled, not shortened), with its
//! source line where DWARF has one (`# line`, which jeprof skips). A frame nothing names stays out
//! of the section: jeprof and every report print it as its address.

use std::collections::BTreeMap;
use std::path::Path;

use jeprof_dumpfmt::{Profile, SourceLine, SymbolTable};

use crate::binary;
use crate::error::Error;
use crate::input::{read_dump, MemoryMap, ReadPolicy};
use crate::symbolize::keys::{name_keys, EntryLines, Found, KeyIndex, KeyNames};
use crate::symbolize::{is_shared_library, SymbolizeOptions};

/// Reads the dump at `path` ([`crate::input::read_dump`], `--binary` checked against it as every
/// subcommand checks it) and names its frames ([`add_symbols`]). A dump that already has a
/// symbol section is returned as read: its names are the ones its process saw.
pub fn symbolize_file(
    path: &Path,
    options: &SymbolizeOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Profile, Error> {
    let mut profile = read_dump(path, policy)?;
    binary::check(&profile, path, options.binary.as_ref())?;
    if profile.symbols.is_none() {
        add_symbols(&mut profile, options);
    }
    Ok(profile)
}

/// Gives `profile` (a dump without a symbol section) the section of what `options` name: each
/// key jeprof looks up ([`jeprof_dumpfmt::model::symbol_key`]) with its names, innermost first,
/// and their source lines where known. `binary=` names `--binary`, else the first executable file
/// of the memory map that is not a shared library (the program).
pub fn add_symbols(profile: &mut Profile, options: &SymbolizeOptions) {
    let mut index = KeyIndex::default();
    index.rebuild(profile, |_| true);
    let mut table = TableMaker::default();
    let program = {
        let map = MemoryMap::of(profile);
        name_keys(profile, &mut index, options, &map, &mut table);
        let mapped_program = map
            .mappings()
            .iter()
            .find(|m| m.executable && m.is_file() && !is_shared_library(&m.path))
            .map(|m| m.path.clone());
        options
            .binary
            .as_ref()
            .map(|b| b.display().to_string())
            .or(mapped_program)
    };
    profile.symbols = Some(SymbolTable {
        binary: program,
        names: table.names,
        lines: table.lines,
    });
}

/// [`name_keys`]' caller here: the symbol section's entries, by key.
#[derive(Default)]
struct TableMaker {
    names: BTreeMap<u64, Vec<String>>,
    lines: BTreeMap<u64, Vec<Option<SourceLine>>>,
    /// Ids handed out (the section needs none; the engine asks for one per key).
    next: u32,
}

impl TableMaker {
    fn id(&mut self) -> u32 {
        self.next += 1;
        self.next - 1
    }
}

impl<'p> KeyNames<'p> for TableMaker {
    // Only dumps without a symbol section come here, so no key is named by one.
    fn entry(&mut self, key: u64, raw: &'p [String], _lines: EntryLines<'p>) -> u32 {
        self.names.insert(key, raw.to_vec());
        self.id()
    }

    fn found(&mut self, key: u64, found: Found) -> u32 {
        if !found.lines.is_empty() {
            self.lines.insert(key, found.lines);
        }
        self.names.insert(key, found.full_names);
        self.id()
    }

    fn unnamed(&mut self, _key: u64, _prefixed: bool) -> u32 {
        self.id()
    }
}
