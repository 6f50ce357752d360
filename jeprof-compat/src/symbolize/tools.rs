//! One object file's names as jeprof's `MapToSymbols` finds them, and as the project's own views
//! show them, from one list of sources.
//!
//! The sources of an object (its [`ObjectNames`]):
//! - its own `.symtab` and `.dynsym` and, when it has DWARF, its `.debug_info`;
//! - else a separate debug file: by build id, then by `.gnu_debuglink`
//!   ([`super::debug_files::separate_debug_file`]), in the system debug directory
//!   (`/usr/lib/debug`, as binutils, gdb and perf look by default) and in the `--debug-dir`s;
//! - MiniDebugInfo (`.gnu_debugdata`: an xz-compressed ELF whose `.symtab` keeps the functions
//!   `.dynsym` lacks), read by the project's rule only: jeprof's tools do not read it.
//!
//! jeprof's rule ([`ObjectNames::jeprof`]) is its `addr2line -f -C [-i]` then `nm` fallback:
//! addr2line's answer (DWARF, else BFD's nearest preceding function symbol of the debug file, or
//! of the object's own `.symtab`, else `.dynsym`), and where it prints `??`, or where the `nm`
//! routine's full name begins with addr2line's short name, the routine `nm -n` (else `nm -D -n`)
//! lists as the last at or before the address. The project's rule ([`ObjectNames::sized`]) names
//! an address only by DWARF or by a function symbol whose size covers it.

use std::path::{Path, PathBuf};

use jeprof_dumpfmt::SourceLine;

use super::debug_files::{separate_debug_file, SYSTEM_DEBUG_DIR};
use super::elf_tables::{nm_demangle, sized_in, ElfTables, NmBoundaries};
use crate::names;

/// What jeprof prints for an address of an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JeprofName {
    /// Names, innermost first, demangled (full), with their source lines when DWARF gave them.
    Named(Vec<String>, Vec<Option<SourceLine>>),
    /// `0x` and the 16-digit key: nm listed routines, none before the address's end.
    Address,
    /// The bare 16-digit key: addr2line printed `??` and nm listed nothing.
    Bare,
}

/// An object file opened for naming: its tables, its DWARF (its own or its debug file's), the
/// debug file's tables (BFD looks up symbols there when the DWARF came from it) and nm's
/// boundaries.
pub(crate) struct ObjectNames {
    tables: ElfTables,
    dwarf: Option<addr2line::Loader>,
    debug_tables: Option<ElfTables>,
    /// The MiniDebugInfo's tables, when the object carries one.
    mini: Option<ElfTables>,
    nm: NmBoundaries,
}

impl ObjectNames {
    /// Opens the object at `path`, its debug file looked for in the system debug directory
    /// then in `debug_dirs`.
    pub(crate) fn open(path: &Path, debug_dirs: &[PathBuf]) -> Option<ObjectNames> {
        let tables = ElfTables::open(path)?;
        let nm = NmBoundaries::of(&tables);
        let (dwarf, debug_tables) = if tables.has_dwarf {
            (addr2line::Loader::new(path).ok(), None)
        } else {
            let mut dirs = vec![PathBuf::from(SYSTEM_DEBUG_DIR)];
            dirs.extend(debug_dirs.iter().cloned());
            match separate_debug_file(path, &tables, &dirs) {
                Some(debug) => (addr2line::Loader::new(&debug).ok(), ElfTables::open(&debug)),
                None => (None, None),
            }
        };
        let mini = tables.debugdata.as_deref().and_then(mini_debug_info);
        Some(ObjectNames {
            tables,
            dwarf,
            debug_tables,
            mini,
            nm,
        })
    }

    /// The object's own tables.
    pub(crate) fn tables(&self) -> &ElfTables {
        &self.tables
    }

    /// DWARF's frames at `address`, innermost first (name, line); empty when DWARF has no
    /// function there. `None` when no compilation unit covers it.
    fn dwarf_frames(&self, address: u64) -> Vec<(Option<String>, Option<SourceLine>)> {
        let mut out = Vec::new();
        let Some(loader) = &self.dwarf else {
            return out;
        };
        if let Ok(mut frames) = loader.find_frames(address) {
            while let Ok(Some(frame)) = frames.next() {
                let name = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.raw_name().ok())
                    .map(|raw| names::demangle(&raw));
                let line = frame.location.and_then(|l| {
                    Some(SourceLine {
                        file: l.file?.to_string(),
                        line: l.line?,
                    })
                });
                out.push((name, line));
            }
        }
        out
    }

    /// `addr2line -f -C [-i] -e IMAGE` for one address: names innermost first (only the
    /// innermost without `-i`), or `None` for `??`.
    fn addr2line(&self, address: u64) -> Option<(Vec<String>, Vec<Option<SourceLine>>)> {
        self.tables.section_at(address)?;
        let frames = self.dwarf_frames(address);
        let named: Vec<(String, Option<SourceLine>)> = frames
            .into_iter()
            .filter_map(|(n, l)| Some((n?, l)))
            .collect();
        if !named.is_empty() {
            let keep = if self.nm.inlines { named.len() } else { 1 };
            let (names, lines) = named.into_iter().take(keep).unzip();
            return Some((names, lines));
        }
        // No function in DWARF: BFD's symbol lookup, in the debug file's table when the DWARF
        // came from one, else in the object's own.
        let symbols = match &self.debug_tables {
            Some(d) if self.dwarf.is_some() => d.addr2line_symbols(),
            _ => self.tables.addr2line_symbols(),
        };
        let f = self.tables.bfd_function(symbols, address)?;
        Some((vec![nm_demangle(&f.name)], vec![None]))
    }

    /// jeprof's names for the object's address `address`.
    pub(crate) fn jeprof(&self, address: u64) -> JeprofName {
        let nm = self.nm.routine_at(address);
        let Some((found, lines)) = self.addr2line(address) else {
            return match (nm, self.nm.is_empty()) {
                (Some(full), _) => JeprofName::Named(vec![nm_name(full)], Vec::new()),
                (None, false) => JeprofName::Address,
                (None, true) => JeprofName::Bare,
            };
        };
        // MapToSymbols: nm's routine replaces a name it begins with (its tag, and any suffix
        // such as a symbol version, kept).
        let names = found
            .into_iter()
            .map(|full| {
                let short = names::short_function_name(&full);
                match nm {
                    Some(routine) if routine.starts_with(&short) => nm_name(routine),
                    _ => full,
                }
            })
            .collect();
        let lines = if lines.iter().all(Option::is_none) {
            Vec::new()
        } else {
            lines
        };
        JeprofName::Named(names, lines)
    }

    /// The project's names for `address`: DWARF's functions, else the function symbol whose
    /// size covers it (of the debug file, else of the object's `.symtab`, else of its
    /// MiniDebugInfo, else `.dynsym`);
    /// `None` past the end of every sized symbol.
    pub(crate) fn sized(&self, address: u64) -> Option<(Vec<String>, Vec<Option<SourceLine>>)> {
        let frames = self.dwarf_frames(address);
        if frames.iter().any(|(n, _)| n.is_some()) {
            let (names, lines): (Vec<String>, Vec<Option<SourceLine>>) = frames
                .into_iter()
                .filter_map(|(n, l)| Some((n?, l)))
                .unzip();
            let lines = if lines.iter().all(Option::is_none) {
                Vec::new()
            } else {
                lines
            };
            return Some((names, lines));
        }
        let f = self
            .debug_tables
            .as_ref()
            .and_then(|d| sized_in(d.symtab(), address))
            .or_else(|| sized_in(self.tables.symtab(), address))
            .or_else(|| {
                self.mini
                    .as_ref()
                    .and_then(|m| sized_in(m.symtab(), address))
            })
            .or_else(|| sized_in(self.tables.dynsym(), address))?;
        Some((vec![names::demangle(strip_version(&f.name))], Vec::new()))
    }
}

/// The name jeprof shows for an nm routine: `ShortFunctionName` of its full name (which drops
/// the `<start>` tag too), so that a version suffix after a C++ argument list goes as well.
fn nm_name(full: &str) -> String {
    names::short_function_name(&untag(full))
}

/// The most bytes a MiniDebugInfo may decompress to: it holds a symbol table, a few megabytes
/// for the largest programs; more is not one.
const MINI_DEBUG_INFO_LIMIT: usize = 64 << 20;

/// The tables of a MiniDebugInfo (`.gnu_debugdata`, xz-compressed), `None` when it does not
/// decompress (within [`MINI_DEBUG_INFO_LIMIT`]) to an ELF file.
fn mini_debug_info(compressed: &[u8]) -> Option<ElfTables> {
    /// A `Vec` that refuses to grow past the limit.
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + buf.len() > MINI_DEBUG_INFO_LIMIT {
                return Err(std::io::Error::other("MiniDebugInfo too large"));
            }
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(compressed), &mut out).ok()?;
    ElfTables::parse(out.0.as_slice())
}

/// A routine's full name without jeprof's `<start>` tag.
fn untag(full: &str) -> String {
    match full.rfind('<') {
        Some(i)
            if full.ends_with('>')
                && full[i + 1..full.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit()) =>
        {
            full[..i].to_string()
        }
        _ => full.to_string(),
    }
}

/// A dynamic symbol's name without its version (`malloc@@GLIBC_2.2.5` is `malloc`).
fn strip_version(name: &str) -> &str {
    name.split('@').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn tool(program: &str, args: &[&std::ffi::OsStr]) {
        let status = Command::new(program)
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("{program} (binutils, xz-utils) is needed: {e}"));
        assert!(status.success(), "{program} {args:?} failed");
    }

    /// Fedora's recipe (`find-debuginfo`): strip the program, keep its function symbols in a
    /// small ELF, xz it, add it as `.gnu_debugdata`. The stripped program's `.dynsym` lacks
    /// `mid_a`; its MiniDebugInfo names it, by the project's rule and not by jeprof's.
    #[test]
    fn mini_debug_info_names_a_stripped_programs_function_by_the_projects_rule() {
        let prog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/compat/prog_pie");
        let dir = tempfile::tempdir().unwrap();
        let (stripped, mini) = (dir.path().join("prog"), dir.path().join("mini"));
        let os = |p: &Path| p.as_os_str().to_owned();
        tool("strip", &[&os(&prog), "-o".as_ref(), &os(&stripped)]);
        let keep = dir.path().join("keep");
        std::fs::write(&keep, "leaf_alloc\nmid_a\nmid_b\nmain\n").unwrap();
        let keep_arg = format!("--keep-symbols={}", keep.display());
        tool(
            "objcopy",
            &["-S".as_ref(), keep_arg.as_ref(), &os(&prog), &os(&mini)],
        );
        tool("xz", &["-k".as_ref(), &os(&mini)]);
        let section = format!(".gnu_debugdata={}.xz", mini.display());
        tool(
            "objcopy",
            &["--add-section".as_ref(), section.as_ref(), &os(&stripped)],
        );

        let original = ElfTables::open(&prog).unwrap();
        let mid_a = original.symtab.iter().find(|s| s.name == "mid_a").unwrap();
        let inside = mid_a.value + mid_a.size / 2;
        let names = ObjectNames::open(&stripped, &[]).unwrap();
        assert!(names.tables.symtab.is_empty(), "strip left a .symtab");
        assert!(names.mini.is_some(), "no MiniDebugInfo read");
        assert_eq!(names.sized(inside).unwrap().0, vec!["mid_a".to_string()]);
        // jeprof's tools do not read it: its nm -D has no mid_a.
        assert_ne!(
            names.jeprof(inside),
            JeprofName::Named(vec!["mid_a".into()], Vec::new())
        );
    }

    #[test]
    fn untag_removes_only_jeprofs_start_tag() {
        assert_eq!(
            untag("getpwuid@@GLIBC_2.2.5<d8ab0>"),
            "getpwuid@@GLIBC_2.2.5"
        );
        assert_eq!(untag("Vec<T>"), "Vec<T>");
        assert_eq!(untag("plain"), "plain");
        assert_eq!(strip_version("malloc@@GLIBC_2.2.5"), "malloc");
    }
}
