//! Writing heap_v2 dumps that legacy jeprof reports correctly.
//!
//! Layout (`jeprof-format.md` §1 and §2.8):
//!
//! ```text
//! --- symbol                      only with symbols and `WriteOptions::symbols`
//! binary=<program>
//! 0x<key> <outer>--<inlined>...   keys are the addresses jeprof looks up (callers minus one)
//! ---
//! --- heap
//! heap_v2/<R>
//!   t*: <n>: <s> [<n>: <s>]       header totals (jeprof never reads them)
//!   t<uid>: ... [<name>]          header per-thread lines
//! # <key>: <value>                annotations; jeprof ignores lines it does not recognise
//! @ 0x<leaf> 0x<caller> ...
//!   t*: <n>: <s> [<n>: <s>]
//!   t<uid>: <n>: <s> [<n>: <s>]
//!   # var <objs> <bytes> <objs> <bytes>    this entry's variances, for our reader
//!
//! MAPPED_LIBRARIES:
//! <maps text>
//! ```
//!
//! Every `(n, s)` comes from [`crate::encode::encode_pair`]; a stack whose best encoding needs several
//! entries is written as several `@` records with the same frames, which jeprof (and every other
//! reader we know of) adds up. Hex is lowercase (jeprof's caller adjustment lowercases, an uppercase
//! leaf would become a different key), a stack never has zero frames (jeprof would give its counts to
//! the previous stack), and no line ever has objects without bytes (jeprof would divide by zero).

use std::io::{self, Write};
use std::path::Path;

use crate::encode::{encode_pair, Pair, Rounding};
use crate::error::Error;
use crate::model::{Counts, Profile};

/// Choices for [`write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// How figures become integers; see [`crate::encode`].
    pub rounding: Rounding,
    /// Write the profile's symbol table (if it has one) as a `--- symbol` section, so that
    /// `jeprof --text <dump>` needs no binary.
    pub symbols: bool,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            rounding: Rounding::Optimal,
            symbols: true,
        }
    }
}

/// Writes `profile` to `out`. The profile is validated first ([`Profile::validate`]).
pub fn write(profile: &Profile, out: &mut dyn Write, options: &WriteOptions) -> Result<(), Error> {
    profile.validate()?;
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    write_unbuffered(profile, &mut out, options)?;
    out.flush()?;
    Ok(())
}

/// The dump as a string.
pub fn to_string(profile: &Profile, options: &WriteOptions) -> Result<String, Error> {
    let mut buf = Vec::new();
    write(profile, &mut buf, options)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Writes the dump to `path` atomically: into a temporary file beside it (mode 0600 on Unix), flushed
/// to disk, then renamed over `path`. A reader never sees a half-written dump, and a failure leaves
/// any previous file at `path` untouched.
pub fn write_file(profile: &Profile, path: &Path, options: &WriteOptions) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| Error::Io {
        file: Some(path.to_path_buf()),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"),
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| -> Result<(), Error> {
        let mut options_fs = std::fs::OpenOptions::new();
        options_fs.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options_fs, 0o600);
        let mut file = options_fs.open(&tmp)?;
        write(profile, &mut file, options)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| e.in_file(path))
}

fn write_unbuffered(
    profile: &Profile,
    out: &mut impl Write,
    options: &WriteOptions,
) -> Result<(), Error> {
    let period = profile.sample_period;
    if options.symbols {
        if let Some(symbols) = &profile.symbols {
            writeln!(out, "--- symbol")?;
            if let Some(binary) = &symbols.binary {
                writeln!(out, "binary={binary}")?;
            }
            for (address, names) in &symbols.names {
                if names.is_empty() {
                    continue;
                }
                write!(out, "0x{address:016x} ")?;
                // Outer function first, then the functions inlined into it.
                for (i, name) in names.iter().rev().enumerate() {
                    if i > 0 {
                        out.write_all(b"--")?;
                    }
                    // A newline inside a name would end the symbol line early.
                    out.write_all(name.replace(['\n', '\r'], " ").as_bytes())?;
                }
                writeln!(out)?;
            }
            writeln!(out, "---")?;
            writeln!(out, "--- heap")?;
        }
    }
    writeln!(out, "heap_v2/{period}")?;
    // The header lines are never read by jeprof; jemalloc encodes them once from the totals.
    write_counts_line(out, "*", &[plain(&profile.totals(), period)], 0, None)?;
    for t in &profile.threads {
        write_counts_line(
            out,
            &t.thread.to_string(),
            &[plain(&t.counts, period)],
            0,
            t.name.as_deref(),
        )?;
    }
    for (k, v) in &profile.annotations {
        writeln!(
            out,
            "# {}: {}",
            k.replace(['\n', ':'], " "),
            v.replace('\n', " ")
        )?;
    }
    for stack in &profile.stacks {
        let aggregate = encode_counts(&stack.counts, period, options.rounding);
        let threads: Vec<(u64, Vec<(Pair, Pair)>)> = stack
            .threads
            .iter()
            .map(|t| (t.thread, encode_counts(&t.counts, period, options.rounding)))
            .filter(|(_, e)| !e.is_empty())
            .collect();
        let records = threads
            .iter()
            .map(|(_, e)| e.len())
            .chain([aggregate.len()])
            .max()
            .unwrap_or(0);
        for record in 0..records {
            out.write_all(b"@")?;
            if stack.frames.is_empty() {
                // jeprof gives the counts of a bare `@` to the previous stack; an explicit null
                // frame keeps them apart.
                out.write_all(b" 0x0")?;
            }
            for frame in &stack.frames {
                write!(out, " 0x{frame:x}")?;
            }
            writeln!(out)?;
            write_counts_line(out, "*", &aggregate, record, None)?;
            for (thread, entries) in &threads {
                if record < entries.len() {
                    write_counts_line(out, &thread.to_string(), entries, record, None)?;
                }
            }
            let c = &stack.counts;
            let v = if record == 0 {
                [
                    c.inuse.objects_variance,
                    c.inuse.bytes_variance,
                    c.accum.objects_variance,
                    c.accum.bytes_variance,
                ]
            } else {
                [0.0; 4]
            };
            writeln!(out, "  # var {:e} {:e} {:e} {:e}", v[0], v[1], v[2], v[3])?;
        }
    }
    if let Some(maps) = &profile.mapped_libraries {
        writeln!(out)?;
        writeln!(out, "MAPPED_LIBRARIES:")?;
        out.write_all(maps.as_bytes())?;
    }
    Ok(())
}

const ZERO: Pair = Pair { n: 0, s: 0 };

fn plain(counts: &Counts, period: u64) -> (Pair, Pair) {
    let one = |objects: f64, bytes: f64| {
        encode_pair(objects, bytes, period, Rounding::Nearest)
            .first()
            .copied()
            .unwrap_or(ZERO)
    };
    (
        one(counts.inuse.objects, counts.inuse.bytes),
        one(counts.accum.objects, counts.accum.bytes),
    )
}

/// The `(inuse, accum)` pairs of each entry; as many entries as the longer of the two encodings.
fn encode_counts(counts: &Counts, period: u64, rounding: Rounding) -> Vec<(Pair, Pair)> {
    let inuse = encode_pair(counts.inuse.objects, counts.inuse.bytes, period, rounding);
    let accum = encode_pair(counts.accum.objects, counts.accum.bytes, period, rounding);
    (0..inuse.len().max(accum.len()))
        .map(|i| {
            (
                inuse.get(i).copied().unwrap_or(ZERO),
                accum.get(i).copied().unwrap_or(ZERO),
            )
        })
        .collect()
}

fn write_counts_line(
    out: &mut impl Write,
    thread: &str,
    entries: &[(Pair, Pair)],
    index: usize,
    name: Option<&str>,
) -> io::Result<()> {
    let (a, b) = entries.get(index).copied().unwrap_or((ZERO, ZERO));
    write!(out, "  t{thread}: {}: {} [{}: {}]", a.n, a.s, b.n, b.s)?;
    if let Some(name) = name {
        write!(out, " {}", name.replace(['\n', '\r'], " "))?;
    }
    writeln!(out)
}
