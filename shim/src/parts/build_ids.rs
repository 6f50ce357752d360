//! The GNU build ids of the loaded objects (the program and its shared libraries), read from their
//! `PT_NOTE` segments in memory with `dl_iterate_phdr`: no file is opened, so it works when the
//! binary was deleted or replaced since it started. pprof readers match a mapping to its debug
//! file by this id, and dumps carry it (`# build_id:` lines, [`jeprof_dumpfmt::build_ids`]) so
//! that `jeprof-compat symbolize --debug-dir` names a dump's frames later. Called at report time
//! only, never on the allocation path.

use std::ffi::{c_int, c_void, CStr};

use jeprof_dumpfmt::build_ids::BuildId;
use jeprof_dumpfmt::maps::Mapping;

/// `NT_GNU_BUILD_ID`, the note type of the build id (elf.h).
const NT_GNU_BUILD_ID: u32 = 3;

/// One loaded object with a build id, as `dl_iterate_phdr` gives it.
struct Loaded {
    /// `dlpi_name`: the path the loader opened, empty for the program itself.
    name: String,
    /// The address of its first loaded byte (`dlpi_addr` + the lowest `PT_LOAD` `p_vaddr`).
    first_byte: u64,
    /// The build id, lowercase hex.
    id: String,
}

/// `(path, build id in lower-case hex)` for every loaded object that has one ([`named`] with the
/// process's memory map now).
pub(crate) fn loaded() -> Vec<(String, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    named(&jeprof_dumpfmt::maps::parse_maps(&maps))
        .into_iter()
        .map(|b| (b.path, b.id))
        .collect()
}

/// The build id of every loaded object that has one, each named as `maps` (the process's memory
/// map, sorted) names the mapping holding its first byte: the loader's name for a library is the
/// path it opened (`/lib/x86_64-linux-gnu/libc.so.6`), where the memory map has the file's own
/// path (`/usr/lib/x86_64-linux-gnu/libc.so.6` when `/lib` is a link), which is what a dump's
/// mappings are matched by (the kernel's vDSO is `[vdso]` there, `linux-vdso.so.1` to the
/// loader). Without such a mapping, the loader's name (the program's: `/proc/self/exe`'s
/// target).
pub(crate) fn named(maps: &[Mapping]) -> Vec<BuildId> {
    let program = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    iterate()
        .into_iter()
        .filter_map(|l| {
            let i = maps.partition_point(|m| m.start <= l.first_byte);
            let mapped = i
                .checked_sub(1)
                .map(|i| &maps[i])
                .filter(|m| l.first_byte < m.end && !m.path.is_empty());
            let path = match mapped {
                Some(m) => m.path.clone(),
                None if l.name.is_empty() => program.clone(),
                None => l.name,
            };
            (!path.is_empty()).then_some(BuildId { path, id: l.id })
        })
        .collect()
}

/// The program's own build id, if it has one.
pub(crate) fn program() -> Option<String> {
    iterate()
        .into_iter()
        .find(|l| l.name.is_empty())
        .map(|l| l.id)
}

/// Every loaded object with a build id.
fn iterate() -> Vec<Loaded> {
    let mut found: Vec<Loaded> = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's signature, only reads the dl_phdr_info it is
    // given (valid for the call) and neither walks the loaded objects nor unwinds, and `data` is
    // `&mut found`, alive for the whole call.
    unsafe {
        crate::base::loader::iterate_phdr(visit, (&mut found as *mut Vec<Loaded>).cast());
    }
    found
}

/// `dl_iterate_phdr`'s callback: one loaded object.
///
/// # Safety
/// `info` is the `dl_phdr_info` dl_iterate_phdr passes (valid for this call, its `dlpi_phdr`
/// pointing at `dlpi_phnum` program headers of an object mapped at `dlpi_addr`), and `data` is
/// the `&mut Vec` [`iterate`] passed.
unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: see the function's contract.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Vec<Loaded>>()) };
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null dlpi_name is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: dlpi_phdr points at dlpi_phnum program headers (the contract).
    let headers =
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let first_byte = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_LOAD)
        .map(|h| h.p_vaddr)
        .min()
        .unwrap_or(0)
        .wrapping_add(info.dlpi_addr);
    for header in headers.iter().filter(|h| h.p_type == libc::PT_NOTE) {
        let start = (info.dlpi_addr as usize).wrapping_add(header.p_vaddr as usize);
        // SAFETY: a PT_NOTE segment of a loaded object lies inside one of its PT_LOAD segments,
        // which the loader mapped readable at dlpi_addr + p_vaddr for p_memsz bytes.
        let notes =
            unsafe { std::slice::from_raw_parts(start as *const u8, header.p_memsz as usize) };
        if let Some(id) = gnu_build_id(notes, header.p_align) {
            found.push(Loaded {
                name,
                first_byte,
                id,
            });
            return 0;
        }
    }
    0
}

/// The build id in a `PT_NOTE` segment's notes (each `namesz, descsz, type` as native-endian
/// `u32`s, then the name and the descriptor, each padded to the segment's alignment, 4 or 8).
fn gnu_build_id(mut notes: &[u8], align: u64) -> Option<String> {
    let align = if align == 8 { 8 } else { 4 };
    let pad = |n: usize| n.checked_add(align - 1).map(|n| n & !(align - 1));
    let word = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes), word(&notes[4..]), word(&notes[8..]));
        let name_end = 12usize.checked_add(pad(namesz)?)?;
        let desc_end = name_end.checked_add(pad(descsz)?)?;
        if desc_end > notes.len() {
            return None;
        }
        if kind as u32 == NT_GNU_BUILD_ID && &notes[12..12 + namesz] == b"GNU\0" {
            let desc = &notes[name_end..name_end + descsz];
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        notes = &notes[desc_end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend((name.len() as u32).to_ne_bytes());
        out.extend((desc.len() as u32).to_ne_bytes());
        out.extend(kind.to_ne_bytes());
        out.extend(name);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    #[test]
    fn build_id_note_is_found_after_other_notes() {
        let mut notes = note(b"GNU\0", 1, &[0; 16]); // NT_GNU_ABI_TAG
        notes.extend(note(
            b"GNU\0",
            NT_GNU_BUILD_ID,
            &[0xde, 0xad, 0xbe, 0xef, 0x01],
        ));
        assert_eq!(gnu_build_id(&notes, 4).as_deref(), Some("deadbeef01"));
    }

    #[test]
    fn truncated_or_foreign_notes_give_no_build_id() {
        let full = note(b"GNU\0", NT_GNU_BUILD_ID, &[1, 2, 3, 4]);
        assert_eq!(gnu_build_id(&full[..full.len() - 4], 4), None);
        assert_eq!(
            gnu_build_id(&note(b"Go\0\0", NT_GNU_BUILD_ID, &[1; 4]), 4),
            None
        );
        let mut huge = full.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(gnu_build_id(&huge, 4), None);
    }

    #[test]
    fn each_build_id_is_named_by_the_memory_maps_path_of_its_object() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let maps = jeprof_dumpfmt::maps::parse_maps(&maps);
        let named = named(&maps);
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let program = program().expect("the test binary has a build id");
        assert!(
            named
                .iter()
                .any(|b| Path::new(&b.path) == exe && b.id == program),
            "{named:?}"
        );
        for b in &named {
            assert!(
                maps.iter().any(|m| m.path == b.path),
                "{} is not a path of the memory map",
                b.path
            );
        }
    }

    #[test]
    fn the_test_binary_reports_the_build_id_readelf_sees() {
        // Rust's linker driver asks for a build id on Linux; readelf (binutils, which jeprof needs
        // anyway) reads it from the file.
        let id = program().expect("the test binary has a GNU build id note");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let out = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&exe)
            .output()
            .expect("readelf runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("Build ID: {id}")),
            "{id} not in {text}"
        );
    }
}
