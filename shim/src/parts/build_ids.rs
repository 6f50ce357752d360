//! The GNU build ids of the loaded objects (the program and its shared libraries), read from their
//! `PT_NOTE` segments in memory with `dl_iterate_phdr`: no file is opened, so it works when the
//! binary was deleted or replaced since it started. pprof readers match a mapping to its debug
//! file by this id. Called at report time only, never on the allocation path.

use std::ffi::{c_int, c_void, CStr};

/// `NT_GNU_BUILD_ID`, the note type of the build id (elf.h).
const NT_GNU_BUILD_ID: u32 = 3;

/// `(path, build id in lower-case hex)` for every loaded object that has one. The program itself
/// (which `dl_iterate_phdr` names with an empty string) is named by `/proc/self/exe`'s target.
pub(crate) fn loaded() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's signature and only reads the dl_phdr_info it
    // is given (valid for the call), and `data` is `&mut found`, alive for the whole call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(visit),
            (&mut found as *mut Vec<(String, String)>).cast(),
        );
    }
    let program = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    for (path, _) in &mut found {
        if path.is_empty() {
            path.clone_from(&program);
        }
    }
    found.retain(|(path, _)| !path.is_empty());
    found
}

/// The program's own build id, if it has one.
pub(crate) fn program() -> Option<String> {
    let program = std::fs::read_link("/proc/self/exe")
        .ok()?
        .display()
        .to_string();
    loaded()
        .into_iter()
        .find(|(path, _)| *path == program)
        .map(|(_, id)| id)
}

/// `dl_iterate_phdr`'s callback: one loaded object.
///
/// # Safety
/// `info` is the `dl_phdr_info` dl_iterate_phdr passes (valid for this call, its `dlpi_phdr`
/// pointing at `dlpi_phnum` program headers of an object mapped at `dlpi_addr`), and `data` is
/// the `&mut Vec` [`loaded`] passed.
unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: see the function's contract.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Vec<(String, String)>>()) };
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
    for header in headers.iter().filter(|h| h.p_type == libc::PT_NOTE) {
        let start = (info.dlpi_addr as usize).wrapping_add(header.p_vaddr as usize);
        // SAFETY: a PT_NOTE segment of a loaded object lies inside one of its PT_LOAD segments,
        // which the loader mapped readable at dlpi_addr + p_vaddr for p_memsz bytes.
        let notes =
            unsafe { std::slice::from_raw_parts(start as *const u8, header.p_memsz as usize) };
        if let Some(id) = gnu_build_id(notes, header.p_align) {
            found.push((name, id));
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
