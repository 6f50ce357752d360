//! Files written so that nobody else can hijack them and no reader ever sees half of one.
//!
//! A dump holds code addresses, symbol names and the process's memory map, and it is often written
//! into a shared directory (`/var/tmp`, a volume other services write to). [`AtomicFile`] writes it
//! the way a careful database writes its files:
//!
//! 1. a temporary file is *created* beside the target, under an unpredictable name, with
//!    `O_CREAT | O_EXCL` and mode 0600 (the `tempfile` crate). `O_EXCL` fails on any existing name,
//!    a symlink or a dangling symlink included, so a name planted in advance is never followed and a
//!    file planted in advance (say, mode 0666 and owned by someone else) is never written into;
//! 2. the content is written and `fsync`ed;
//! 3. the temporary file is renamed over the target (atomic within a directory: a reader of the
//!    target sees the old file or the new one, never a mix), and the directory is `fsync`ed so the
//!    rename survives a crash.
//!
//! Any failure, or dropping the [`AtomicFile`] without [`AtomicFile::commit`], removes the temporary
//! file and leaves the target untouched. Writers that race on one target each have their own
//! temporary file; every one of them succeeds and the last rename wins, so the target always holds
//! one complete file.
//!
//! The rename replaces the target's directory entry: if the target itself is a symlink, the link is
//! replaced by the file (the file it pointed to is not written), which is what keeps a planted
//! symlink at the target's name harmless too.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// A file being written to a temporary name beside `target`, put in place by [`commit`].
///
/// [`commit`]: AtomicFile::commit
#[derive(Debug)]
pub struct AtomicFile {
    temp: BufWriter<tempfile::NamedTempFile>,
    target: PathBuf,
}

impl AtomicFile {
    /// Creates the temporary file in `target`'s directory (`.<name>.<random>.tmp`, mode 0600).
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile, Error> {
        let target = target.as_ref();
        let fail = |source: io::Error| Error::from(source).in_file(target);
        let name = target.file_name().ok_or_else(|| {
            fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path names no file",
            ))
        })?;
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        // `tempfile` opens with O_CREAT | O_EXCL | O_CLOEXEC and mode 0600, under a random name it
        // retries on collision.
        let temp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .rand_bytes(12)
            .tempfile_in(directory(target))
            // tempfile's error names the temporary file, which the user never chose: name the
            // target's directory instead.
            .map_err(|e| {
                let why = match e.kind() {
                    io::ErrorKind::NotFound => "does not exist".to_string(),
                    io::ErrorKind::PermissionDenied => "cannot be written".to_string(),
                    kind => format!("cannot hold a new file ({kind})"),
                };
                fail(io::Error::new(
                    e.kind(),
                    format!("its directory {} {why}", directory(target).display()),
                ))
            })?;
        Ok(AtomicFile {
            temp: BufWriter::with_capacity(1 << 16, temp),
            target: target.to_path_buf(),
        })
    }

    /// The path this file will have once committed.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, `fsync`s, renames the file over the target and `fsync`s the directory.
    pub fn commit(self) -> Result<(), Error> {
        let target = self.target;
        let fail = |source: io::Error| Error::from(source).in_file(&target);
        let temp = self.temp.into_inner().map_err(|e| fail(e.into_error()))?;
        temp.as_file().sync_all().map_err(fail)?;
        temp.persist(&target).map_err(|e| fail(e.error))?;
        // The rename is durable only once the directory is; a directory that cannot be opened
        // for this (some network file systems) still holds the renamed file.
        if let Ok(dir) = File::open(directory(&target)) {
            dir.sync_all().map_err(fail)?;
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// The directory a path's file lives in (`.` for a bare name).
fn directory(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Writes a whole file atomically: `body` writes the content into an [`AtomicFile`] for `target`,
/// which is committed if `body` succeeds and removed otherwise.
pub fn write_atomically<E>(
    target: impl AsRef<Path>,
    body: impl FnOnce(&mut AtomicFile) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<Error>,
{
    let mut file = AtomicFile::create(target)?;
    body(&mut file)?;
    file.commit()?;
    Ok(())
}
