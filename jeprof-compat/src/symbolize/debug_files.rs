//! Debug files found by GNU build id and by `.gnu_debuglink` (the system debug directory and
//! `--debug-dir`), and the build ids of object files.
//!
//! Fleets keep debug information apart from the programs they run, by build id: a debug
//! directory holds `.build-id/<first two hex digits>/<the rest>.debug` (debuginfod's cache, the
//! distributions' `/usr/lib/debug`, `objcopy --only-keep-debug` output placed there). A mapping's
//! build id comes from the dump (jeprof-shim's `# build_id:` lines,
//! [`jeprof_dumpfmt::build_ids`]), else from the mapped file when it is at hand (`--binary`
//! standing for it, or the file at its mapped path): a raw jemalloc dump carries none.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jeprof_dumpfmt::build_ids::debug_file_path;

use crate::error::Error;

/// A mapping that holds frames of a dump and has a build id, whose debug file is in no
/// `--debug-dir`: its frames are named only as far as the mapped file itself (or `--binary`)
/// names them, else they stay addresses, as jeprof leaves what it cannot name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MissingDebugFile {
    /// The mapped file, as the dump's memory map names it.
    pub path: String,
    /// Its build id, lowercase hex.
    pub build_id: String,
}

impl fmt::Display for MissingDebugFile {
    /// `<path> (build id <hex>): no .build-id/xx/rest.debug`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = debug_file_path(&self.build_id).unwrap_or_default();
        write!(f, "{} (build id {}): no {file}", self.path, self.build_id)
    }
}

/// Who is told of each [`MissingDebugFile`] ([`super::SymbolizeOptions::on_missing`]); called
/// once per mapping and dump, from the threads that read dumps.
#[derive(Clone)]
pub struct OnMissing(pub Arc<dyn Fn(&MissingDebugFile) + Send + Sync>);

impl fmt::Debug for OnMissing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnMissing(..)")
    }
}

/// Checks that every `--debug-dir` is a directory that can be read.
pub fn check_debug_dirs(dirs: &[PathBuf]) -> Result<(), Error> {
    for dir in dirs {
        let problem = match std::fs::read_dir(dir) {
            Ok(_) => continue,
            Err(e) => e.to_string(),
        };
        return Err(Error::DebugDir {
            dir: dir.clone(),
            reason: problem,
        });
    }
    Ok(())
}

/// The debug file of build id `id` in the first of `dirs` that has it (a regular file).
pub(crate) fn find_debug_file(dirs: &[PathBuf], id: &str) -> Option<PathBuf> {
    let relative = debug_file_path(id)?;
    dirs.iter()
        .map(|d| d.join(&relative))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

/// The GNU build id of the object file at `path`, lowercase hex as `file` and pprof print it;
/// `None` when it cannot be read or has none. Only the headers and the note are read.
pub(crate) fn read_build_id(path: &Path) -> Option<String> {
    use object::Object;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let file = object::File::parse(&cache).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// The system debug directory: where binutils, gdb and perf look by default, and where Debian's
/// `-dbg`/`-dbgsym` packages install (`.build-id/xx/rest.debug`).
pub const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// The separate debug file of the object at `path`, as binutils finds it: by build id in each of
/// `dirs` (`.build-id/xx/rest.debug`, whose own build id must match), else by `.gnu_debuglink`
/// (the named file next to the object, in its `.debug/` subdirectory, then under each of `dirs`
/// followed by the object's directory; its CRC-32 must match).
pub(crate) fn separate_debug_file(
    path: &Path,
    tables: &super::elf_tables::ElfTables,
    dirs: &[PathBuf],
) -> Option<PathBuf> {
    if let Some(id) = &tables.build_id {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let by_id = find_debug_file(dirs, &hex)
            .filter(|p| read_build_id(p).as_deref() == Some(hex.as_str()));
        if by_id.is_some() {
            return by_id;
        }
    }
    let (name, crc) = tables.debuglink.as_ref()?;
    let canonical = std::fs::canonicalize(path).ok()?;
    let dir = canonical.parent()?;
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    for d in dirs {
        candidates.push(d.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
    }
    candidates
        .into_iter()
        .filter(|c| c.as_path() != canonical.as_path())
        .find(|c| file_crc32(c) == Some(*crc))
}

/// The CRC-32 (IEEE, as `.gnu_debuglink` records it) of the file at `path`.
fn file_crc32(path: &Path) -> Option<u32> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            return Some(hasher.finalize());
        }
        hasher.update(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_programs_build_id_is_the_one_file_prints() {
        let prog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/compat/prog");
        assert_eq!(
            read_build_id(&prog).as_deref(),
            Some("620d200ec3b024e816f94969fff4d0cb4afb3eb5")
        );
        assert_eq!(read_build_id(Path::new("/no/such/file")), None);
        assert_eq!(read_build_id(Path::new("/")), None);
    }

    #[test]
    fn a_debug_file_is_found_in_the_first_directory_that_has_it() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let file = b.path().join(".build-id/ab/cdef.debug");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"x").unwrap();
        let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
        assert_eq!(find_debug_file(&dirs, "ABCDEF"), Some(file));
        assert_eq!(find_debug_file(&dirs, "abcd00"), None);
        assert!(check_debug_dirs(&dirs).is_ok());
        let missing = a.path().join("nothing");
        let e = check_debug_dirs(std::slice::from_ref(&missing)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("--debug-dir {}: ", missing.display())),
            "{e}"
        );
    }
}
