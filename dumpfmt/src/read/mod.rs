//! Reading heap_v2 dumps: the ones real jemalloc writes and the ones [`crate::write`] writes.
//!
//! Every figure is what jeprof's `ReadThreadedHeapProfile` computes for the same entry, in the same
//! floating-point operations ([`crate::math::jeprof_unbias`]), so a report built from this reader agrees
//! with jeprof's. Where jeprof silently *ignores* a line (a stray space before `]`, trailing text after a
//! counts line, a sign), this reader reports an error instead: such a line is never written by jemalloc,
//! and accepting it would mean either disagreeing with jeprof or hiding corruption.
//!
//! Accepted framing: leading `%` lines (skipped, as jeprof does), an optional `--- symbol` section
//! followed by `--- heap`, blank lines anywhere in the body, `# …` comment lines (this crate's
//! annotations, labels and per-entry variances), and a `MAPPED_LIBRARIES:` (or `--- Memory map:`) section whose
//! text is kept verbatim. A bare `@` line (a stack the unwinder returned empty) is read as jeprof reads
//! it: its counts go to the previous stack, or nowhere before the first one.
//!
//! The reader follows the grammar in [`crate::syntax`] as [`crate::write`] does, one concern per
//! module: the input as numbered lines (`lines`), what a line is (`classify`), the front up to the
//! header (`header`) with the symbol section (`symbols`), the body's state (`body`) over stack
//! lines (`stack`), counts lines (`counts`) and comments (`comments`), the memory map
//! (`memory_map`), and how the dump ends (`truncation`).

use std::io::BufRead;
use std::path::Path;

use crate::error::Error;
use crate::model::{Profile, Stack};

mod body;
mod classify;
mod comments;
mod counts;
mod errors;
mod header;
mod lines;
mod memory_map;
mod stack;
mod symbols;
mod truncation;

pub use crate::syntax::{END_MARKER, WRITER, WRITER_KEY};
pub use lines::MAX_LINE;
pub use memory_map::MAX_MAPS;
pub use truncation::Truncation;

use errors::not_heap;
use lines::Lines;

/// Choices for [`read_file_with`] and [`read_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read a dump that was cut while being written (a crash, a full disk, a copy taken too early):
    /// the incomplete last line or record is dropped and [`Read::truncation`] says what was lost.
    /// Without it, a cut dump is an [`Error::Truncated`] naming the line where it ends.
    pub allow_truncated: bool,
}

/// A dump read with [`read_file_with`] or [`read_with`].
#[derive(Debug, Clone)]
pub struct Read {
    /// The figures.
    pub profile: Profile,
    /// Set when the dump was cut and [`ReadOptions::allow_truncated`] was given.
    pub truncation: Option<Truncation>,
}

/// Reads a dump from a file. Errors name the file. A dump that was cut is an error
/// ([`read_file_with`] reads one anyway).
pub fn read_file(path: impl AsRef<Path>) -> Result<Profile, Error> {
    read_file_with(path, &ReadOptions::default()).map(|r| r.profile)
}

/// Reads a dump from a file, streaming: memory holds the figures kept, never the file.
///
/// Only regular files are read: a device (`/dev/zero`, `/dev/urandom`), a FIFO, a socket or a
/// directory is refused at once with [`Error::NotHeapV2`] (opening never blocks: the file is opened
/// non-blocking and checked before anything is read). Errors name the file.
pub fn read_file_with(path: impl AsRef<Path>, options: &ReadOptions) -> Result<Read, Error> {
    let mut stacks = Vec::new();
    let mut read = read_file_stacks_with(path, options, |_, stack| stacks.push(stack))?;
    read.profile.stacks = stacks;
    Ok(read)
}

/// `path`, opened for reading if it is a regular file. Opened non-blocking, so that a FIFO with no
/// writer is refused rather than waited on.
#[cfg(unix)]
fn open_regular(path: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    let what = if kind.is_file() {
        return Ok(file);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    };
    Err(not_regular(what))
}

/// `path`, opened for reading if it is a regular file. Off Unix no file type blocks the opening
/// (Windows opens a directory or a pipe at once, or refuses to), so the type is checked after.
#[cfg(not(unix))]
fn open_regular(path: &Path) -> Result<std::fs::File, Error> {
    let file = std::fs::File::open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(not_regular(if kind.is_dir() {
        "a directory"
    } else {
        "a special file"
    }))
}

/// The refusal of a file that is `what` rather than a regular file, with what to do instead.
fn not_regular(what: &str) -> Error {
    if what == "a directory" {
        return not_heap(
            "a directory, not a regular file: give the dumps in it (`DIR/*.heap`; `merge` also \
             takes the directory itself with `--inputs-dir DIR`)",
        );
    }
    not_heap(&format!(
        "{what}, not a regular file (dumps are read from regular files only; save the stream to a \
         file first)"
    ))
}

/// A dump file, read through gzip when it is compressed (fleets often store dumps so): the
/// decompressed text goes through the same line reader and its bounds as any dump. A pprof
/// profile (protobuf, gzip-compressed or not) is refused by name.
fn open_dump(path: &Path) -> Result<Box<dyn BufRead>, Error> {
    let file = open_regular(path)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let compressed = reader.fill_buf()?.starts_with(&GZIP_MAGIC);
    let mut reader: Box<dyn BufRead> = if compressed {
        Box::new(std::io::BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(reader),
        ))
    } else {
        Box::new(reader)
    };
    if looks_like_protobuf(reader.fill_buf()?) {
        return Err(not_heap(&format!(
            "a pprof profile ({}profile.proto), not a heap_v2 dump: open it with `go tool pprof`, \
             or give the heap dumps it was made from",
            if compressed { "gzip-compressed " } else { "" }
        )));
    }
    Ok(reader)
}

/// gzip's first two bytes (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether `head` starts as a pprof message does: field 1 (`sample_type`, length-delimited,
/// tag byte 0x0a) and binary bytes in what follows, where a dump has a text line.
fn looks_like_protobuf(head: &[u8]) -> bool {
    head.first() == Some(&0x0a)
        && head
            .iter()
            .take(64)
            .any(|&b| b == 0 || (b < 0x20 && b != b'\n' && b != b'\t' && b != b'\r'))
}

/// Parses a dump held in memory. Never panics, whatever the bytes. A dump that was cut is an error
/// ([`read_with`] reads one anyway).
pub fn parse(input: &[u8]) -> Result<Profile, Error> {
    read_with(input, &ReadOptions::default()).map(|r| r.profile)
}

/// Parses a dump from a stream, line by line: the first bad line fails at once, and memory holds
/// what is kept (the figures, the symbol names, the memory map), never the input. Never panics.
pub fn read_with(input: impl BufRead, options: &ReadOptions) -> Result<Read, Error> {
    let mut stacks = Vec::new();
    let mut read = read_stacks_with(input, options, |_, stack| stacks.push(stack))?;
    read.profile.stacks = stacks;
    Ok(read)
}

/// [`read_file_with`], handing each stack to `on_stack` instead of keeping it
/// ([`read_stacks_with`]): memory holds the header, the symbol section and the memory map, never
/// the stacks.
pub fn read_file_stacks_with(
    path: impl AsRef<Path>,
    options: &ReadOptions,
    on_stack: impl FnMut(&Profile, Stack),
) -> Result<Read, Error> {
    let path = path.as_ref();
    let input = open_dump(path).map_err(|e| e.in_file(path))?;
    read_stacks_with(input, options, on_stack).map_err(|e| e.in_file(path))
}

/// [`read_with`], handing each stack to `on_stack` as soon as it is complete instead of keeping it,
/// for readers that fold a dump of millions of stacks into something smaller.
///
/// `on_stack` gets the stacks in the dump's order, each exactly as [`read_with`] would put it in
/// [`Profile::stacks`], with the profile read so far: its sample period (final), symbol section,
/// header thread lines, annotations and labels (all of which come before the first stack), but not yet the
/// memory map, which comes last. The [`Read`] returned is [`read_with`]'s with no stacks. A dump
/// that fails (a bad line, a cut dump without [`ReadOptions::allow_truncated`], figures that are
/// not finite) fails as it does with [`read_with`], with the same error, possibly after some of its
/// stacks were handed over: the caller throws away what it made of them. A stack with figures that
/// are not finite is never handed over.
pub fn read_stacks_with(
    input: impl BufRead,
    options: &ReadOptions,
    mut on_stack: impl FnMut(&Profile, Stack),
) -> Result<Read, Error> {
    let mut lines = Lines::new(input);
    let mut profile = Profile::default();
    profile.sample_period = header::read_front(&mut lines, &mut profile)?;
    let (end, invalid) = body::read_body(&mut lines, &mut profile, &mut on_stack)?;
    let truncation = end.outcome(options.allow_truncated, invalid)?;
    comments::take_sample_period(&mut profile);
    Ok(Read {
        profile,
        truncation,
    })
}
