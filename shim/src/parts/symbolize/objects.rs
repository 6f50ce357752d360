//! The loaded objects, their files mapped read-only, and what an ELF file offers a symbolizer:
//! its DWARF sections (borrowed from the mapping, or decompressed within a budget), its symbol
//! table (searched in one pass, nothing copied), and the separate debug file it names.
//!
//! A mapped file's pages are the page cache's (`RssFile` while touched), not the process's
//! anonymous memory, and the kernel drops them under pressure; what this module allocates is a
//! few bytes per object and per address, plus decompressed sections, which are held to
//! [`DECOMPRESSED_BUDGET`].

use std::ffi::{c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use object::elf::{ELFCOMPRESS_ZLIB, ELF_NOTE_GNU, NT_GNU_BUILD_ID, SHF_COMPRESSED};
use object::read::elf::{CompressionHeader, FileHeader, SectionHeader, SectionTable, Sym};
use object::{Bytes, NativeEndian};

use super::dwarf::{Dwarf, Slice};

type Elf = object::elf::FileHeader64<NativeEndian>;

/// The most bytes of compressed DWARF sections (`SHF_COMPRESSED`) one object may decompress.
/// gimli reads `.debug_info`, `.debug_line`, `.debug_str` and the rest side by side, so they are
/// all alive at once (one object at a time); an object whose compressed sections need more is
/// named from its symbol table only (no inlined frames, no lines). 12 MiB of the 16 MiB bound:
/// glibc's separate debug file (Debian 12, Ubuntu) needs 8.5 MB, and what the rest of a lookup
/// holds (one unit's abbreviations and line header, the frames) stays well under the other 4.
pub(super) const DECOMPRESSED_BUDGET: usize = 12 << 20;

/// A loaded object: the file it came from and where its `PT_LOAD` segments are.
pub(super) struct Library {
    pub(super) path: PathBuf,
    /// Added to the file's addresses to give the process's (`dlpi_addr`).
    pub(super) bias: u64,
    /// `[p_vaddr, p_vaddr + p_memsz)` of each `PT_LOAD` segment.
    pub(super) segments: Vec<(u64, u64)>,
}

impl Library {
    /// The file's address for the process's `avma`, if one of its segments holds it.
    pub(super) fn svma(&self, avma: u64) -> Option<u64> {
        let svma = avma.wrapping_sub(self.bias);
        self.segments
            .iter()
            .any(|&(start, end)| start <= svma && svma < end)
            .then_some(svma)
    }
}

/// The objects loaded now, the program first (named by `/proc/self/exe`).
pub(super) fn loaded() -> Vec<Library> {
    /// Copies one object's name, bias and segments.
    ///
    /// # Safety
    /// `info` is the `dl_phdr_info` dl_iterate_phdr passes (its name a C string or null, its
    /// `dlpi_phnum` headers readable), `data` the `&mut Vec<Library>` [`loaded`] passed.
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: see the contract.
        let (info, libraries) = unsafe { (&*info, &mut *data.cast::<Vec<Library>>()) };
        let name = if info.dlpi_name.is_null() {
            &[][..]
        } else {
            // SAFETY: a non-null `dlpi_name` is a NUL-terminated string the loader owns.
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
        };
        let path = match (libraries.is_empty(), name.is_empty()) {
            (true, true) => PathBuf::from("/proc/self/exe"),
            (false, true) => return 0,
            _ => PathBuf::from(OsStr::from_bytes(name)),
        };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: the loader gives `dlpi_phnum` program headers at `dlpi_phdr`.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let segments = headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD)
            .map(|h| (h.p_vaddr, h.p_vaddr.wrapping_add(h.p_memsz)))
            .collect();
        libraries.push(Library {
            path,
            bias: info.dlpi_addr,
            segments,
        });
        0
    }
    let mut libraries: Vec<Library> = Vec::new();
    // SAFETY: `each` matches the callback's signature, never unwinds (no panicking operation)
    // and writes only through `data`, which points at `libraries`, alive for the call.
    unsafe {
        crate::base::loader::iterate_phdr(each, (&mut libraries as *mut Vec<Library>).cast())
    };
    libraries
}

/// A file mapped read-only and private; unmapped on drop.
pub(super) struct Mapping {
    // SAFETY: `ptr` is the start of a live `len`-byte PROT_READ mapping owned by this value.
    ptr: *mut c_void,
    len: usize,
}

impl Mapping {
    /// Maps the whole file at `path`; `None` if it cannot be opened, is empty or is not a
    /// regular file.
    pub(super) fn open(path: &Path) -> Option<Mapping> {
        let file = std::fs::File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        let len = usize::try_from(meta.len()).ok()?;
        if !meta.is_file() || len == 0 {
            return None;
        }
        // SAFETY: a fresh read-only private mapping of an open descriptor; the kernel keeps the
        // file's pages mapped after the descriptor closes. A file truncated meanwhile would make
        // a read past its end fault (SIGBUS): objects the loader has mapped are not truncated
        // in place by installers, which write a new file and rename it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapping { ptr, len })
    }

    /// The file's bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` describe a live read-only mapping (the field's invariant),
        // unmapped only when `self` drops, after every borrow of it.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours (the field's invariant) and no borrow outlives `self`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// An ELF file's sections, parsed in place.
pub(super) struct ElfFile<'a> {
    data: &'a [u8],
    endian: NativeEndian,
    sections: SectionTable<'a, Elf>,
}

impl<'a> ElfFile<'a> {
    /// `None` if `data` is not a 64-bit ELF file of this machine's byte order.
    pub(super) fn parse(data: &'a [u8]) -> Option<ElfFile<'a>> {
        let elf = Elf::parse(data).ok()?;
        let endian = elf.endian().ok()?;
        let sections = elf.sections(endian, data).ok()?;
        Some(ElfFile {
            data,
            endian,
            sections,
        })
    }

    fn section(&self, name: &str) -> Option<&'a <Elf as FileHeader>::SectionHeader> {
        self.sections
            .section_by_name(self.endian, name.as_bytes())
            .map(|(_, s)| s)
    }

    /// The GNU build id, from the first `NT_GNU_BUILD_ID` note.
    fn build_id(&self) -> Option<&'a [u8]> {
        for section in self.sections.iter() {
            if let Ok(Some(mut notes)) = section.notes(self.endian, self.data) {
                while let Ok(Some(note)) = notes.next() {
                    if note.name() == ELF_NOTE_GNU && note.n_type(self.endian) == NT_GNU_BUILD_ID {
                        return Some(note.desc());
                    }
                }
            }
        }
        None
    }

    /// The separate debug file for this object at `path`, looked for where gdb and backtrace
    /// look: `/usr/lib/debug/.build-id/xx/rest.debug` by build id, then the `.gnu_debuglink`
    /// name beside the file, in its `.debug/`, and under `/usr/lib/debug` (its CRC unchecked,
    /// as backtrace).
    pub(super) fn debug_file(&self, path: &Path) -> Option<PathBuf> {
        const DEBUG: &str = "/usr/lib/debug";
        let debug_dir = Path::new(DEBUG).is_dir();
        if let Some(id) = self.build_id().filter(|id| id.len() >= 2 && debug_dir) {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let candidate = PathBuf::from(format!(
                "{DEBUG}/.build-id/{}/{}.debug",
                &hex[..2],
                &hex[2..]
            ));
            if candidate.is_file() {
                return Some(candidate);
            }
        }
        let link = self
            .section(".gnu_debuglink")?
            .data(self.endian, self.data)
            .ok()?;
        let name = Path::new(OsStr::from_bytes(
            &link[..link.iter().position(|&b| b == 0)?],
        ));
        let path = std::fs::canonicalize(path).ok()?;
        let parent = path.parent()?;
        let beside = parent.join(name);
        if beside != path && beside.is_file() {
            return Some(beside);
        }
        let dot_debug = parent.join(".debug").join(name);
        if dot_debug.is_file() {
            return Some(dot_debug);
        }
        let under = Path::new(DEBUG)
            .join(parent.strip_prefix("/").ok()?)
            .join(name);
        (debug_dir && under.is_file()).then_some(under)
    }

    /// Decompresses the `SHF_COMPRESSED` (zlib) DWARF sections gimli will read, if together they
    /// fit [`DECOMPRESSED_BUDGET`]; `None` if not (or one is malformed): then the object gets no
    /// DWARF. `.zdebug_*` sections (the older GNU scheme) are not read.
    pub(super) fn decompress(&self) -> Option<Vec<(&'static str, Vec<u8>)>> {
        let mut total = 0usize;
        let mut compressed = Vec::new();
        for name in DWARF_SECTIONS {
            let Some(section) = self.section(name) else {
                continue;
            };
            if !section.sh_flags(self.endian).contains(SHF_COMPRESSED) {
                continue;
            }
            let mut data = Bytes(section.data(self.endian, self.data).ok()?);
            let header = data.read::<<Elf as FileHeader>::CompressionHeader>().ok()?;
            if header.ch_type(self.endian) != ELFCOMPRESS_ZLIB {
                return None;
            }
            let size = usize::try_from(header.ch_size(self.endian)).ok()?;
            total = total.checked_add(size)?;
            if total > DECOMPRESSED_BUDGET {
                return None;
            }
            compressed.push((*name, data.0, size));
        }
        compressed
            .into_iter()
            .map(|(name, input, size)| Some((name, inflate(input, size)?)))
            .collect()
    }

    /// The DWARF, each section from `decompressed` when there, else borrowed from the file.
    pub(super) fn dwarf<'b>(&self, decompressed: &'b [(&'static str, Vec<u8>)]) -> Dwarf<'b>
    where
        'a: 'b,
    {
        let load = |id: gimli::SectionId| -> Result<Slice<'b>, ()> {
            let name = id.name();
            let bytes: &'b [u8] = if !DWARF_SECTIONS.contains(&name) {
                &[]
            } else if let Some((_, d)) = decompressed.iter().find(|(n, _)| *n == name) {
                d
            } else {
                self.section(name)
                    .filter(|s| !s.sh_flags(self.endian).contains(SHF_COMPRESSED))
                    .and_then(|s| s.data(self.endian, self.data).ok())
                    .unwrap_or(&[])
            };
            Ok(Slice::new(bytes, gimli::NativeEndian))
        };
        match gimli::Dwarf::load(load) {
            Ok(dwarf) => dwarf,
            Err(()) => unreachable!("the loader never fails"),
        }
    }

    /// Whether the file has a non-empty `.symtab` (a stripped file has only `.dynsym`).
    pub(super) fn has_symtab(&self) -> bool {
        self.sections
            .symbols(self.endian, self.data, object::elf::SHT_SYMTAB)
            .is_ok_and(|t| !t.is_empty())
    }

    /// The ELF file a MiniDebugInfo section (`.gnu_debugdata`) holds, decompressed: the function
    /// symbols a stripped program keeps beside its `.dynsym` (Fedora's and others' packages),
    /// as gdb and jeprof-compat read them. `None` without one, or when it does not decompress to
    /// at most [`MINI_DEBUG_INFO_LIMIT`] bytes.
    pub(super) fn mini_debug_info(&self) -> Option<Vec<u8>> {
        let compressed = self
            .section(".gnu_debugdata")?
            .data(self.endian, self.data)
            .ok()?;
        let mut out = Capped(Vec::new());
        lzma_rs::xz_decompress(&mut std::io::BufReader::new(compressed), &mut out).ok()?;
        Some(out.0)
    }

    /// Whether the file has a `.debug_info` section.
    pub(super) fn has_dwarf(&self) -> bool {
        self.section(".debug_info").is_some()
    }

    /// For each of `svmas` (sorted), the name (raw bytes) of the function or object symbol
    /// holding it (`.symtab`, else `.dynsym`): the one starting last when several do, and of
    /// aliases (one start) the table's last, which is a global one when there is one (ELF puts
    /// local symbols first): `malloc` rather than `__malloc`. One pass over the table, keeping a
    /// start and a name offset per address.
    pub(super) fn symbol_names(&self, svmas: &[u64]) -> Vec<Option<&'a [u8]>> {
        let mut best: Vec<Option<(u64, u32)>> = vec![None; svmas.len()];
        let mut table = self
            .sections
            .symbols(self.endian, self.data, object::elf::SHT_SYMTAB)
            .ok();
        if table.as_ref().is_none_or(|t| t.is_empty()) {
            table = self
                .sections
                .symbols(self.endian, self.data, object::elf::SHT_DYNSYM)
                .ok();
        }
        let Some(table) = table else {
            return vec![None; svmas.len()];
        };
        for sym in table.iter() {
            let kind = sym.st_type();
            if (kind != object::elf::STT_FUNC && kind != object::elf::STT_OBJECT)
                || sym.st_shndx(self.endian) == object::elf::SHN_UNDEF
            {
                continue;
            }
            let start: u64 = sym.st_value(self.endian);
            let size: u64 = sym.st_size(self.endian);
            // backtrace's test: `start <= addr <= start + size` (the end is inclusive).
            let lo = svmas.partition_point(|&a| a < start);
            let hi = svmas.partition_point(|&a| a <= start.saturating_add(size));
            for slot in &mut best[lo..hi.max(lo)] {
                if slot.is_none_or(|(s, _)| s <= start) {
                    *slot = Some((start, sym.st_name(self.endian)));
                }
            }
        }
        let strings = table.strings();
        best.into_iter()
            .map(|b| b.and_then(|(_, name)| strings.get(name).ok()))
            .collect()
    }
}

/// The most bytes a MiniDebugInfo may decompress to: it holds a symbol table, a few megabytes for
/// the largest programs; more is not one.
const MINI_DEBUG_INFO_LIMIT: usize = 64 << 20;

/// A `Vec` that refuses to grow past [`MINI_DEBUG_INFO_LIMIT`].
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

/// The DWARF sections the symbolizer reads (the rest are given to gimli empty).
const DWARF_SECTIONS: &[&str] = &[
    ".debug_abbrev",
    ".debug_addr",
    ".debug_info",
    ".debug_line",
    ".debug_line_str",
    ".debug_str",
    ".debug_str_offsets",
    ".debug_ranges",
    ".debug_rnglists",
];

/// zlib-inflates `input` into exactly `size` bytes.
fn inflate(input: &[u8], size: usize) -> Option<Vec<u8>> {
    use miniz_oxide::inflate::core::inflate_flags::{
        TINFL_FLAG_PARSE_ZLIB_HEADER, TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
    };
    use miniz_oxide::inflate::core::{decompress, DecompressorOxide};
    use miniz_oxide::inflate::TINFLStatus;
    // Reserved fallibly: a failed allocation names the object from its symbol table rather than
    // aborting the process being profiled.
    let mut out = Vec::new();
    out.try_reserve_exact(size).ok()?;
    out.resize(size, 0);
    let (status, read, written) = decompress(
        &mut DecompressorOxide::new(),
        input,
        &mut out,
        0,
        TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF | TINFL_FLAG_PARSE_ZLIB_HEADER,
    );
    (status == TINFLStatus::Done && read == input.len() && written == size).then_some(out)
}
