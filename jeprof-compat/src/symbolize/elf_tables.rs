//! What an ELF object's own tables say, read as binutils reads them: its sections, its symbol
//! tables (`.symtab`, and `.dynsym` with GNU symbol versions, `name@@VER` for a default version
//! and `name@VER` for a hidden one, as BFD names dynamic symbols), its build id, its
//! `.gnu_debuglink` and whether it holds DWARF.
//!
//! Two lookups are binutils' own, so that jeprof's output can be reproduced without running
//! binutils: [`ElfTables::bfd_function`] is BFD's `_bfd_elf_find_function` (what `addr2line`
//! prints where DWARF names nothing) and [`NmBoundaries`] is jeprof's `GetProcedureBoundaries`
//! over `nm -n` (else `nm -D -n`). [`ElfTables::sized_function`] is the stricter rule of the
//! project's own views: a symbol names only the addresses inside its size.

use std::path::Path;

use object::elf;
use object::read::elf::{ProgramHeader, SectionHeader, Sym};

/// One section header: what an address is looked up against.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub(crate) index: usize,
    pub(crate) address: u64,
    pub(crate) size: u64,
    /// `SHF_ALLOC`: part of the loaded image (addr2line looks only in those).
    pub(crate) alloc: bool,
    /// `SHF_EXECINSTR`, or one of the names BFD types as code (nm's `t`).
    pub(crate) code: bool,
}

/// One symbol of a symbol table, in the table's order.
#[derive(Debug, Clone)]
pub(crate) struct ElfSymbol {
    /// BFD's name: dynamic symbols carry their version (`@@VER`, hidden `@VER`).
    pub(crate) name: String,
    pub(crate) value: u64,
    pub(crate) size: u64,
    pub(crate) kind: elf::SymbolType,
    pub(crate) bind: elf::SymbolBind,
    pub(crate) hidden: bool,
    /// `st_shndx`: `None` for undefined and reserved indexes (`SHN_ABS` is `abs`).
    pub(crate) section: Option<usize>,
    pub(crate) abs: bool,
}

impl ElfSymbol {
    /// Whether nm lists it with an address: defined (or absolute), and not one of the
    /// debugger-only symbols (`STT_FILE`, `STT_SECTION`) nm leaves out without `-a`.
    fn listed_by_nm(&self) -> bool {
        (self.section.is_some() || self.abs)
            && self.kind != elf::STT_FILE
            && self.kind != elf::STT_SECTION
    }

    /// Whether nm types it `t` or `T` (a plain symbol in a code section): jeprof prefers such a
    /// symbol among those at one address.
    fn nm_text(&self, sections: &[Section]) -> bool {
        let special = self.kind == elf::STT_GNU_IFUNC
            || self.bind == elf::STB_WEAK
            || self.bind == elf::STB_GNU_UNIQUE;
        !special
            && !self.abs
            && self
                .section
                .and_then(|i| sections.get(i))
                .is_some_and(|s| s.code)
    }
}

/// The tables of one ELF object file.
#[derive(Debug, Default)]
pub(crate) struct ElfTables {
    pub(crate) sections: Vec<Section>,
    pub(crate) symtab: Vec<ElfSymbol>,
    pub(crate) dynsym: Vec<ElfSymbol>,
    /// Lookups over `symtab` and `dynsym`, built once.
    pub(crate) symtab_index: FunctionIndex,
    pub(crate) dynsym_index: FunctionIndex,
    pub(crate) build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the debug file's name and the CRC-32 of its bytes.
    pub(crate) debuglink: Option<(String, u32)>,
    /// Whether `.debug_info` has bytes here (a stripped file's is gone, a debug file's kept).
    pub(crate) has_dwarf: bool,
    /// `.gnu_debugdata` (MiniDebugInfo: an xz-compressed ELF holding a `.symtab`), as stored.
    pub(crate) debugdata: Option<Vec<u8>>,
    /// `(file offset, file size, virtual address)` of each `PT_LOAD` segment.
    pub(crate) segments: Vec<(u64, u64, u64)>,
}

impl ElfTables {
    /// Reads the tables of the 64-bit little-endian ELF file at `path` (the platforms the
    /// project runs on); `None` when it is not one or cannot be read.
    /// Only the headers, the symbol tables and their strings are read (a debug file's DWARF,
    /// hundreds of megabytes for some programs, is not).
    pub(crate) fn open(path: &Path) -> Option<ElfTables> {
        let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
        ElfTables::parse(&cache)
    }

    /// [`ElfTables::open`] over any [`object::ReadRef`]: a file read on demand, or bytes in
    /// memory (MiniDebugInfo's decompressed ELF).
    pub(crate) fn parse<'d, R: object::ReadRef<'d>>(data: R) -> Option<ElfTables> {
        use object::read::elf::ElfFile64;
        use object::Object as _;
        let file = ElfFile64::<object::Endianness, R>::parse(data).ok()?;
        let endian = file.endian();
        let table = file.elf_section_table();
        let (sections, has_dwarf, debugdata) = read_sections(table, endian, data);
        let versions = table.versions(endian, data).ok().flatten();
        let symbols = |t: &object::read::elf::SymbolTable<'d, elf::FileHeader64<_>, R>,
                       versioned: bool| {
            let strings = t.strings();
            t.symbols()
                .iter()
                .enumerate()
                .skip(1)
                .map(|(i, s)| {
                    let mut name = s
                        .name(endian, strings)
                        .map(|n| String::from_utf8_lossy(n).into_owned())
                        .unwrap_or_default();
                    if let (true, Some(v)) = (versioned, versions.as_ref()) {
                        let index = v.version_index(endian, object::SymbolIndex(i));
                        if let Ok(Some(version)) = v.version(index.index()) {
                            // A definition's default version is `@@`; a hidden one, or a
                            // version needed from another object (a copy-relocated `stdin`),
                            // is `@`.
                            let hidden = index.is_hidden() || version.file().is_some();
                            let at = if hidden { "@" } else { "@@" };
                            if s.st_shndx(endian) != elf::SHN_UNDEF {
                                name.push_str(at);
                                name.push_str(&String::from_utf8_lossy(version.name()));
                            }
                        }
                    }
                    let shndx = s.st_shndx(endian);
                    ElfSymbol {
                        name,
                        value: s.st_value(endian),
                        size: s.st_size(endian),
                        kind: s.st_type(),
                        bind: s.st_bind(),
                        hidden: s.st_visibility() == elf::STV_HIDDEN,
                        section: shndx.index().map(usize::from),
                        abs: shndx == elf::SHN_ABS,
                    }
                })
                .collect::<Vec<_>>()
        };
        let symtab = symbols(file.elf_symbol_table(), false);
        let dynsym = symbols(file.elf_dynamic_symbol_table(), true);
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let debuglink = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc));
        let segments = file
            .elf_program_headers()
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_LOAD)
            .map(|p| (p.p_offset(endian), p.p_filesz(endian), p.p_vaddr(endian)))
            .collect();
        let symtab_index = FunctionIndex::new(&symtab);
        let dynsym_index = FunctionIndex::new(&dynsym);
        Some(ElfTables {
            segments,
            sections,
            symtab,
            dynsym,
            symtab_index,
            dynsym_index,
            build_id,
            debuglink,
            has_dwarf,
            debugdata,
        })
    }

    /// The first allocated section holding `address` (addr2line's `find_address_in_section`).
    pub(crate) fn section_at(&self, address: u64) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.alloc && address >= s.address && address - s.address < s.size)
    }

    /// The address in this file of file offset `offset` (through the loadable segment holding
    /// it), as a mapping's offset translates.
    pub(crate) fn address_of_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| offset >= *off && offset - off < *size)
            .map(|(off, _, vaddr)| offset - off + vaddr)
    }

    /// The symbols addr2line reads from this file: `.symtab`, else `.dynsym`.
    pub(crate) fn addr2line_symbols(&self) -> Indexed<'_> {
        if self.symtab.is_empty() {
            Indexed(&self.dynsym, &self.dynsym_index)
        } else {
            Indexed(&self.symtab, &self.symtab_index)
        }
    }

    /// `.symtab` with its lookups.
    pub(crate) fn symtab(&self) -> Indexed<'_> {
        Indexed(&self.symtab, &self.symtab_index)
    }

    /// `.dynsym` with its lookups.
    pub(crate) fn dynsym(&self) -> Indexed<'_> {
        Indexed(&self.dynsym, &self.dynsym_index)
    }

    /// BFD's `_bfd_elf_find_function` over `symbols` (this file's, or its debug file's, whose
    /// section indexes are this file's): among the symbols in the section holding `address`
    /// that may be functions (not objects, sections, files or thread-local; a hidden local
    /// untyped symbol of size 0 is an annobin marker), the one starting last at or before
    /// `address`; at one start the larger size (0 counting as 1) wins, then the first in the
    /// table. Sizes are not checked against `address`: past the end of every symbol, the
    /// nearest preceding one still names it.
    pub(crate) fn bfd_function<'s>(
        &self,
        symbols: Indexed<'s>,
        address: u64,
    ) -> Option<&'s ElfSymbol> {
        let section = self.section_at(address)?.index;
        let starts = &symbols.1.bfd;
        let end = starts.partition_point(|&(sec, value, _)| (sec, value) <= (section, address));
        let &(sec, _, i) = starts[..end].last()?;
        (sec == section).then(|| &symbols.0[i as usize])
    }
}

/// A symbol table with its [`FunctionIndex`].
#[derive(Clone, Copy)]
pub(crate) struct Indexed<'a>(pub(crate) &'a [ElfSymbol], pub(crate) &'a FunctionIndex);

/// A symbol table's function lookups, sorted once so that each address costs a binary search.
#[derive(Debug, Default)]
pub(crate) struct FunctionIndex {
    /// BFD's candidates: `(section, start, symbol index)`, one per (section, start): the one
    /// BFD prefers there (the larger size, then the first in the table).
    bfd: Vec<(usize, u64, u32)>,
    /// Function symbols with a size: `(start, size, symbol index)` by start.
    sized: Vec<(u64, u64, u32)>,
    /// The largest size in `sized`: how far back a symbol holding an address may start.
    max_size: u64,
}

impl FunctionIndex {
    fn new(symbols: &[ElfSymbol]) -> FunctionIndex {
        let mut bfd: Vec<(usize, u64, u64, u32)> = symbols
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let section = s.section?;
                if matches!(
                    s.kind,
                    elf::STT_OBJECT | elf::STT_SECTION | elf::STT_FILE | elf::STT_TLS
                ) || (s.size == 0
                    && s.bind == elf::STB_LOCAL
                    && s.kind == elf::STT_NOTYPE
                    && s.hidden)
                {
                    return None;
                }
                Some((section, s.value, s.size.max(1), i as u32))
            })
            .collect();
        // At one start: the larger size first, then the table's order.
        bfd.sort_by(|a, b| (a.0, a.1, b.2, a.3).cmp(&(b.0, b.1, a.2, b.3)));
        bfd.dedup_by(|later, first| (later.0, later.1) == (first.0, first.1));
        let mut sized: Vec<(u64, u64, u32)> = symbols
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(s.kind, elf::STT_FUNC | elf::STT_GNU_IFUNC)
                    && s.section.is_some()
                    && s.size > 0
            })
            .map(|(i, s)| (s.value, s.size, i as u32))
            .collect();
        sized.sort_unstable();
        let max_size = sized.iter().map(|&(_, size, _)| size).max().unwrap_or(0);
        FunctionIndex {
            bfd: bfd.into_iter().map(|(sec, v, _, i)| (sec, v, i)).collect(),
            sized,
            max_size,
        }
    }
}

/// The function symbol of `symbols` whose extent `[start, start + size)` holds `address`: of
/// several, the one starting last, then the larger.
pub(crate) fn sized_in(symbols: Indexed<'_>, address: u64) -> Option<&ElfSymbol> {
    let index = symbols.1;
    let end = index
        .sized
        .partition_point(|&(start, _, _)| start <= address);
    index.sized[..end]
        .iter()
        .rev()
        .take_while(|&&(start, _, _)| address - start < index.max_size)
        .filter(|&&(start, size, _)| address - start < size)
        .max_by_key(|&&(start, size, _)| (start, size))
        .map(|&(_, _, i)| &symbols.0[i as usize])
}

/// jeprof's procedure boundaries of one image (`GetProcedureBoundaries` over `nm -n --demangle`,
/// else `nm -D -n --demangle`): each listed address's routine, from its start to the next listed
/// address, the last one empty.
#[derive(Debug, Default)]
pub(crate) struct NmBoundaries {
    /// `(start, end, full name)`, ordered by start. The full name carries jeprof's `<start>` tag
    /// unless a later `t`/`T` symbol at the same address replaced it (jeprof does not tag those).
    pub(crate) routines: Vec<(u64, u64, String)>,
    /// Whether a routine is called `_fini`: jeprof then runs addr2line with `-i` (inlined
    /// frames), using `_fini`'s address as a separator.
    pub(crate) inlines: bool,
}

impl NmBoundaries {
    /// The boundaries jeprof reads from `tables` (its `.symtab` when nm lists any of it, else
    /// its `.dynsym`).
    pub(crate) fn of(tables: &ElfTables) -> NmBoundaries {
        let from_symtab = NmBoundaries::from_symbols(&tables.symtab, &tables.sections);
        if !from_symtab.routines.is_empty() {
            return from_symtab;
        }
        NmBoundaries::from_symbols(&tables.dynsym, &tables.sections)
    }

    fn from_symbols(symbols: &[ElfSymbol], sections: &[Section]) -> NmBoundaries {
        // nm -n: by address, then by (mangled) name.
        let mut listed: Vec<&ElfSymbol> = symbols.iter().filter(|s| s.listed_by_nm()).collect();
        listed.sort_by(|a, b| {
            (nm_value(a), a.name.as_bytes()).cmp(&(nm_value(b), b.name.as_bytes()))
        });
        // GetProcedureBoundariesViaNm: a hash keyed by the routine's name, so a later routine of
        // the same (untagged) name replaces an earlier one.
        let mut table: std::collections::HashMap<String, (u64, u64)> =
            std::collections::HashMap::new();
        let mut inlines = false;
        let mut last_start: Option<u64> = None;
        let mut routine: Option<String> = None;
        for s in listed {
            let start = nm_value(s);
            let name = nm_demangle(&s.name);
            if Some(start) == last_start {
                if s.nm_text(sections) {
                    routine = Some(name);
                }
                continue;
            }
            if name == "_fini" {
                inlines = true;
            }
            if let (Some(r), Some(prev)) = (routine.take(), last_start) {
                if !r.is_empty() {
                    table.insert(r, (prev, start));
                }
            }
            routine = Some(format!("{name}<{start:x}>"));
            last_start = Some(start);
        }
        if let (Some(r), Some(prev)) = (routine, last_start) {
            if !r.is_empty() {
                table.insert(r, (prev, prev));
            }
        }
        let mut routines: Vec<(u64, u64, String)> = table
            .into_iter()
            .map(|(name, (start, end))| (start, end, name))
            .collect();
        routines.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.cmp(&b.2)));
        NmBoundaries { routines, inlines }
    }

    /// jeprof's `MapSymbolsWithNM` for one address of the image: the full name of the first
    /// routine (by start) whose end lies past `address`, when `address` is before that end;
    /// `None` when it is past every routine's end (jeprof then prints the address). `None` too
    /// when nm listed nothing (check [`NmBoundaries::is_empty`]).
    pub(crate) fn routine_at(&self, address: u64) -> Option<&str> {
        let i = self.routines.partition_point(|r| r.1 <= address);
        let i = i.min(self.routines.len().checked_sub(1)?);
        let (_, end, name) = &self.routines[i];
        (address < *end).then_some(name.as_str())
    }

    /// Whether nm listed nothing (jeprof then has no nm names to fall back to).
    pub(crate) fn is_empty(&self) -> bool {
        self.routines.is_empty()
    }
}

/// The address nm prints for a symbol (`SHN_ABS` symbols: their value).
fn nm_value(s: &ElfSymbol) -> u64 {
    s.value
}

/// `nm --demangle` and `addr2line -C` (BFD's `bfd_demangle`): the name demangled with its
/// argument list, a version suffix (`@@GLIBCXX_3.4.26`) set aside first and kept.
pub(crate) fn nm_demangle(name: &str) -> String {
    match name.find('@') {
        Some(at) if at > 0 => format!("{}{}", crate::names::demangle(&name[..at]), &name[at..]),
        _ => crate::names::demangle(name),
    }
}

/// The sections of an ELF file as the lookups need them, whether it has DWARF (`.debug_info`
/// with contents), and its MiniDebugInfo (`.gnu_debugdata`, still compressed) if it carries one.
fn read_sections<'d, R: object::ReadRef<'d>>(
    table: &object::read::elf::SectionTable<'d, elf::FileHeader64<object::Endianness>, R>,
    endian: object::Endianness,
    data: R,
) -> (Vec<Section>, bool, Option<Vec<u8>>) {
    let mut sections = Vec::with_capacity(table.len());
    let mut has_dwarf = false;
    let mut debugdata = None;
    for (index, header) in table.iter().enumerate() {
        let name = table
            .section_name(endian, header)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        if name == ".gnu_debugdata" && header.sh_type(endian) != elf::SHT_NOBITS {
            debugdata = header.data(endian, data).ok().map(<[u8]>::to_vec);
        }
        let flags = header.sh_flags(endian);
        let nobits = header.sh_type(endian) == elf::SHT_NOBITS;
        if name == ".debug_info" && !nobits && header.sh_size(endian) > 0 {
            has_dwarf = true;
        }
        let code = flags.0 & elf::SHF_EXECINSTR.0 != 0
            || matches!(name.as_str(), ".text" | ".init" | ".fini");
        sections.push(Section {
            index,
            address: header.sh_addr(endian),
            size: header.sh_size(endian),
            alloc: flags.0 & elf::SHF_ALLOC.0 != 0,
            code,
        });
    }
    (sections, has_dwarf, debugdata)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(
        name: &str,
        value: u64,
        size: u64,
        kind: elf::SymbolType,
        bind: elf::SymbolBind,
    ) -> ElfSymbol {
        ElfSymbol {
            name: name.into(),
            value,
            size,
            kind,
            bind,
            hidden: false,
            section: Some(1),
            abs: false,
        }
    }

    fn text() -> Vec<Section> {
        vec![
            Section {
                index: 0,
                address: 0,
                size: 0,
                alloc: false,
                code: false,
            },
            Section {
                index: 1,
                address: 0x1000,
                size: 0x1000,
                alloc: true,
                code: true,
            },
        ]
    }

    #[test]
    fn bfd_names_an_address_past_every_size_by_the_nearest_preceding_function() {
        let tables = ElfTables {
            sections: text(),
            ..ElfTables::default()
        };
        let symbols = vec![
            sym("a", 0x1000, 0x10, elf::STT_FUNC, elf::STB_GLOBAL),
            sym("a_alias", 0x1000, 0x20, elf::STT_FUNC, elf::STB_GLOBAL),
            sym("data", 0x1800, 0x10, elf::STT_OBJECT, elf::STB_GLOBAL),
        ];
        let index = FunctionIndex::new(&symbols);
        let indexed = Indexed(&symbols, &index);
        let f = tables.bfd_function(indexed, 0x1900).unwrap();
        assert_eq!(f.name, "a_alias");
        assert_eq!(
            tables.bfd_function(indexed, 0x1000).unwrap().name,
            "a_alias"
        );
        assert!(tables.bfd_function(indexed, 0x3000).is_none());
        assert!(sized_in(indexed, 0x1900).is_none());
        assert_eq!(sized_in(indexed, 0x1018).unwrap().name, "a_alias");
        assert_eq!(sized_in(indexed, 0x1008).unwrap().name, "a_alias");
    }

    #[test]
    fn nm_boundaries_prefer_a_text_symbol_at_one_address_and_end_at_the_next() {
        let sections = text();
        let symbols = vec![
            sym("b_weak", 0x1000, 0x10, elf::STT_FUNC, elf::STB_WEAK),
            sym("a_first", 0x1000, 0x10, elf::STT_NOTYPE, elf::STB_WEAK),
            sym("c", 0x1000, 0x10, elf::STT_FUNC, elf::STB_GLOBAL),
            sym("_fini", 0x1100, 0, elf::STT_FUNC, elf::STB_GLOBAL),
        ];
        let nm = NmBoundaries::from_symbols(&symbols, &sections);
        assert!(nm.inlines);
        assert_eq!(nm.routine_at(0x1050), Some("c"));
        // Before the first routine: the first routine still (jeprof checks only the end).
        assert_eq!(nm.routine_at(0x10), Some("c"));
        // The last routine is empty: past it is an address.
        assert_eq!(nm.routine_at(0x1100), None);
    }
}
