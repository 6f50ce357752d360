//! `--binary` checked against the dumps it is meant for, and jeprof's `PROGRAM DUMP...` form.
//!
//! jeprof looks a raw dump's addresses up in the program it is given, standing in for the mapping
//! whose file has the program's name (`docs/design.md` §5). A program that does not exist, or
//! whose name no mapping has, names nothing: every frame would print as a bare address and a
//! merge would write `module+0xoffset` frames, with exit status 0. These checks make that an
//! error saying what the dump does map.

use std::io::Read;
use std::path::{Path, PathBuf};

use jeprof_dumpfmt::build_ids;
use jeprof_dumpfmt::Profile;

use crate::error::Error;
use crate::input::MemoryMap;
use crate::symbolize::debug_files::read_build_id;
use crate::symbolize::{is_shared_library, same_file_name};

/// Whether the file at `path` starts as an executable or shared object does (ELF, Mach-O, PE):
/// how jeprof's `PROGRAM DUMP...` form is told from `DUMP DUMP...`. A file that cannot be read
/// is not one, nor is anything but a regular file (opening a FIFO would wait for a writer).
pub fn is_object_file(path: &Path) -> bool {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    if read.is_err() {
        return false;
    }
    const MACH_O: [[u8; 4]; 5] = [
        [0xfe, 0xed, 0xfa, 0xce],
        [0xfe, 0xed, 0xfa, 0xcf],
        [0xce, 0xfa, 0xed, 0xfe],
        [0xcf, 0xfa, 0xed, 0xfe],
        // Universal (fat) binaries.
        [0xca, 0xfe, 0xba, 0xbe],
    ];
    magic == *b"\x7fELF" || MACH_O.contains(&magic) || magic[..2] == *b"MZ"
}

/// Checks that `binary` (`--binary`) is a readable object file; `None` passes.
pub fn check_binary_file(binary: Option<&Path>) -> Result<(), Error> {
    let Some(binary) = binary else {
        return Ok(());
    };
    match std::fs::metadata(binary) {
        Err(source) => Err(Error::BinaryUnreadable {
            binary: binary.to_path_buf(),
            source,
        }),
        Ok(_) if !is_object_file(binary) => Err(Error::NotAProgram {
            binary: binary.to_path_buf(),
        }),
        Ok(_) => Ok(()),
    }
}

/// Checks that `binary` (`--binary`) stands for a mapping of the raw dump `profile` read from
/// `dump`: when the dump's memory map has executable files other than shared libraries (the
/// program, which jeprof does not read from the map), one of them must have `binary`'s file
/// name. A dump with a symbol section needs no program; a map naming no program leaves `binary`
/// as jeprof's catch-all for the addresses outside every mapping (a non-PIE program's dump
/// without a map). Where the dump records a build id for the mapping `binary` stands for,
/// `binary` must have it. `None` passes.
pub fn check_binary_matches(
    profile: &Profile,
    dump: &Path,
    binary: Option<&Path>,
) -> Result<(), Error> {
    let Some(binary) = binary else {
        return Ok(());
    };
    if profile.symbols.is_some() {
        return Ok(());
    }
    let map = MemoryMap::of(profile);
    let mut programs: Vec<&str> = Vec::new();
    for m in map.mappings() {
        if m.executable
            && m.is_file()
            && !is_shared_library(&m.path)
            && !programs.contains(&&*m.path)
        {
            programs.push(&m.path);
        }
    }
    if programs.is_empty() || programs.iter().any(|p| same_file_name(binary, p)) {
        return check_build_id(profile, dump, binary);
    }
    Err(Error::BinaryMatchesNoMapping {
        binary: binary.to_path_buf(),
        dump: dump.to_path_buf(),
        mapped: programs.iter().map(|p| p.to_string()).collect(),
    })
}

/// Checks that `binary` has the build id the dump records for the mapping it stands for
/// (jeprof-shim's `# build_id:` lines), when both are known: another build would name the wrong
/// functions at the dump's addresses.
fn check_build_id(profile: &Profile, dump: &Path, binary: &Path) -> Result<(), Error> {
    let ids = build_ids::from_annotations(&profile.annotations);
    let Some(recorded) = ids.iter().find(|b| same_file_name(binary, &b.path)) else {
        return Ok(());
    };
    match read_build_id(binary) {
        Some(actual) if actual != recorded.id => Err(Error::BinaryBuildIdMismatch {
            binary: binary.to_path_buf(),
            actual,
            dump: dump.to_path_buf(),
            mapped: recorded.path.clone(),
            recorded: recorded.id.clone(),
        }),
        _ => Ok(()),
    }
}

/// jeprof's `[PROGRAM] DUMP...`: when the first of `paths` is a program (an object file) and
/// `binary` is not given, it is taken as the program. A program alone, with no dump after it, or
/// a program beside `--binary`, is an error saying what to write instead.
pub fn split_program(
    mut paths: Vec<PathBuf>,
    binary: Option<PathBuf>,
) -> Result<(Vec<PathBuf>, Option<PathBuf>), Error> {
    let Some(first) = paths.first().filter(|p| is_object_file(p)).cloned() else {
        return Ok((paths, binary));
    };
    if binary.is_some() || paths.len() == 1 {
        return Err(Error::ProgramAsDump {
            program: first,
            with_binary: binary.is_some(),
        });
    }
    paths.remove(0);
    Ok((paths, Some(first)))
}

/// Every check of `--binary` for one dump read from `dump`: [`check_binary_file`], then
/// [`check_binary_matches`].
pub(crate) fn check(profile: &Profile, dump: &Path, binary: Option<&PathBuf>) -> Result<(), Error> {
    let binary = binary.map(PathBuf::as_path);
    check_binary_file(binary)?;
    check_binary_matches(profile, dump, binary)
}
