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
    Err(not_heap(&format!(
        "{what}, not a regular file (dumps are read from regular files only; save the stream to a \
         file first)"
    )))
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
    let file = open_regular(path).map_err(|e| e.in_file(path))?;
    read_stacks_with(
        std::io::BufReader::with_capacity(1 << 16, file),
        options,
        on_stack,
    )
    .map_err(|e| e.in_file(path))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `read_stacks_with` gives: the profile with the stacks it handed over, checking that
    /// each was handed over with the profile's final period, before the memory map, and valid.
    fn streamed(input: &[u8], options: &ReadOptions) -> Result<Profile, String> {
        let mut stacks = Vec::new();
        let mut periods = Vec::new();
        let read = read_stacks_with(input, options, |so_far, stack| {
            assert!(so_far.stacks.is_empty(), "stacks kept");
            assert!(
                so_far.mapped_libraries.is_none(),
                "handed over after the map"
            );
            assert!(
                crate::model::validate_stack(0, &stack).is_ok(),
                "invalid figures handed over: {stack:?}"
            );
            periods.push(so_far.sample_period);
            stacks.push(stack);
        })
        .map_err(|e| e.to_string())?;
        assert!(read.profile.stacks.is_empty());
        assert!(
            periods.iter().all(|&p| p == read.profile.sample_period),
            "periods {periods:?}, final {}",
            read.profile.sample_period
        );
        let mut profile = read.profile;
        profile.stacks = stacks;
        Ok(profile)
    }

    #[test]
    fn every_stack_is_handed_over_complete_valid_and_before_the_map_on_every_fixture_whole_and_cut()
    {
        // `read_with` collects what `read_stacks_with` hands over, so the two agree by
        // construction; what this checks is `streamed`'s invariants on every way a dump can end.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut checked = 0;
        for dir in ["synthetic", "real", "compat", "malformed"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "heap"))
                .collect();
            paths.sort();
            for path in paths {
                let bytes = std::fs::read(&path).expect("fixture");
                for allow_truncated in [false, true] {
                    let options = ReadOptions { allow_truncated };
                    // Cut anywhere: inside a stack, a counts line, the symbol section, the map.
                    let step = (bytes.len() / 37).max(1);
                    for cut in (1..bytes.len()).step_by(step).chain([bytes.len()]) {
                        let input = &bytes[..cut];
                        let whole = read_with(input, &options)
                            .map(|r| r.profile)
                            .map_err(|e| e.to_string());
                        assert_eq!(streamed(input, &options), whole, "{path:?} cut at {cut}");
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 40, "only {checked} fixtures");
    }

    /// Counts the bytes taken from the inner reader.
    struct Counting<'a> {
        inner: &'a [u8],
        taken: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl std::io::Read for Counting<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(out)?;
            self.taken.set(self.taken.get() + n);
            Ok(n)
        }
    }

    #[test]
    fn each_stack_is_handed_over_once_the_next_one_starts_not_at_the_end_of_the_dump() {
        let mut dump = String::from("heap_v2/524288\n  t*: 0: 0 [0: 0]\n");
        // Where the `@` line of each stack ends: the stack before it is complete there.
        let mut complete_at = Vec::new();
        for i in 0..1000u64 {
            dump.push_str(&format!("@ 0x{:x} 0x{:x}\n", 0x1000 + i, 0x2000 + i));
            complete_at.push(dump.len());
            dump.push_str("  t*: 1: 524288 [0: 0]\n");
        }
        dump.push_str("MAPPED_LIBRARIES:\n");
        complete_at.remove(0);
        complete_at.push(dump.len());
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let input = Counting {
            inner: dump.as_bytes(),
            taken: taken.clone(),
        };
        const BUFFER: usize = 64;
        let mut taken_at = Vec::new();
        read_stacks_with(
            std::io::BufReader::with_capacity(BUFFER, input),
            &ReadOptions::default(),
            |_, _| taken_at.push(taken.get()),
        )
        .expect("dump reads");
        assert_eq!(taken_at.len(), 1000);
        for (i, (&taken, &complete)) in taken_at.iter().zip(&complete_at).enumerate() {
            assert!(
                taken <= complete + BUFFER,
                "stack {i} handed over after reading {taken} bytes; complete at {complete}"
            );
        }
    }

    #[test]
    fn streamed_reading_keeps_bare_stacks_variances_threads_and_the_error_order() {
        let options = ReadOptions::default();
        // A bare `@` repeats the previous stack's frames as an entry of its own; per-thread lines
        // and `# var` lines belong to the stack before them; the period is the annotation's.
        let profile = streamed(
            b"heap_v2/524288\n  t*: 2: 20 [0: 0]\n# sample_period: 1024\n\
              @ 0x1 0x2\n# var 1 2 3 4\n  t*: 1: 10 [0: 0]\n  t1: 1: 10 [0: 0]\n\
              @\n  t*: 1: 10 [0: 0]\nMAPPED_LIBRARIES:\n",
            &options,
        )
        .expect("reads");
        assert_eq!(profile.sample_period, 1024);
        assert_eq!(profile.stacks.len(), 2);
        assert_eq!(profile.stacks[0].frames, [1, 2]);
        assert_eq!(profile.stacks[1].frames, [1, 2]);
        assert_eq!(profile.stacks[0].counts.inuse.bytes_variance, 2.0);
        assert_eq!(profile.stacks[0].threads.len(), 1);
        assert!(profile.stacks[1].threads.is_empty());

        // Figures that are not finite are an error, but a later bad line is the one reported
        // (`read_with` always checked figures last).
        let overflow = "heap_v2/1\n@ 0x1\n  t*: 18446744073709551615: 1 [0: 0]\n";
        let err = streamed(format!("{overflow}@ 0x2\n  junk\n").as_bytes(), &options)
            .expect_err("bad line");
        assert!(err.starts_with("line 5: expected "), "{err}");
        let err = streamed(
            format!("{overflow}MAPPED_LIBRARIES:\n").as_bytes(),
            &options,
        )
        .expect_err("infinite figures");
        assert!(
            err.contains("stack 0: every figure must be finite"),
            "{err}"
        );

        // A stack without figures at the end: a cut dump, dropped when that is allowed.
        let cut = b"heap_v2/1\n@ 0x1\n  t*: 1: 1 [0: 0]\n@ 0x2\n";
        let err = streamed(cut, &options).expect_err("cut");
        assert!(err.contains("it was cut"), "{err}");
        let allowed = ReadOptions {
            allow_truncated: true,
        };
        assert_eq!(streamed(cut, &allowed).expect("allowed").stacks.len(), 1);
    }
}
