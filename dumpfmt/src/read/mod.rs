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

use std::io::BufRead;
use std::io::Read as _;
use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;

use crate::error::Error;
use crate::math;
use crate::model::{
    Counts, Estimate, Profile, SourceLine, Stack, SymbolTable, ThreadCounts, ThreadSummary,
};

const COUNTS_EXPECTED: &str =
    "a counts line `t<thread or *>: <objects>: <bytes> [<objects>: <bytes>]`";
const BODY_EXPECTED: &str = "a `@ 0x<address>...` stack line, a counts line \
     `t<thread or *>: <objects>: <bytes> [<objects>: <bytes>]`, or `MAPPED_LIBRARIES:`";

fn counts_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // jeprof's own pattern (bin/jeprof.in, ReadThreadedHeapProfile), applied to the trimmed line, with
    // an optional thread name after `]` that only header thread lines may carry.
    RE.get_or_init(|| {
        Regex::new(r"^t(\*|\d+):\s+(\d+):\s+(\d+)\s+\[\s*(\d+):\s+(\d+)\](?:\s+(.*))?$")
            .expect("static regex")
    })
}

fn header_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^heap_v2/(\d+)\s*$").expect("static regex"))
}

/// jeprof's symbol line, `^0x0*([0-9a-f]+)\s+(.+)`, split by hand (a merge reads thousands of
/// these per dump): the hex digits (lowercase only, as jeprof's pattern) and the names.
fn split_symbol_line(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("0x")?;
    let end = rest
        .find(|c: char| !matches!(c, '0'..='9' | 'a'..='f'))
        .unwrap_or(rest.len());
    let (digits, after) = rest.split_at(end);
    let names = after.trim_start();
    let separated = after.len() > names.len();
    (!digits.is_empty() && separated && !names.is_empty()).then_some((digits, names))
}

/// How many pieces `split("--")` cuts `text` into, less one: the `--` found left to right, not
/// overlapping (a byte loop: `str::matches` sets up a substring searcher on every call).
fn separators(text: &[u8]) -> usize {
    let (mut count, mut i) = (0, 0);
    while i + 1 < text.len() {
        if text[i] == b'-' && text[i + 1] == b'-' {
            count += 1;
            i += 2;
        } else {
            i += 1;
        }
    }
    count
}

/// The annotation key by which a dump says it was written by [`crate::write`] and therefore ends
/// with [`END_MARKER`].
pub const WRITER_KEY: &str = "writer";
/// [`WRITER_KEY`]'s value.
pub const WRITER: &str = "jeprof-dumpfmt";
/// The last line of every dump [`crate::write`] writes. jeprof ignores it (a comment in the body, an
/// unrecognised line in the memory map); a dump that announces it and lacks it was cut.
pub const END_MARKER: &str = "# end of dump";

/// The longest line the reader accepts: far beyond any line jemalloc or we write (a 256-frame stack
/// is about 5 KiB, a long Rust symbol line a few KiB), small enough that a file with no newlines
/// cannot make the reader hold gigabytes.
pub const MAX_LINE: usize = 16 << 20;
/// The largest memory map section the reader keeps (a process's `/proc/self/maps` is rarely more
/// than a few hundred KiB).
pub const MAX_MAPS: usize = 64 << 20;

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

/// What was lost from a dump that was cut while being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The dump's last line (1-based).
    pub line_number: usize,
    /// How the dump ends, in words (the same text as [`Error::Truncated`]'s).
    pub what: String,
    /// Stacks read without their figures, and dropped.
    pub dropped_stacks: usize,
    /// Bytes of an incomplete last line, dropped.
    pub dropped_bytes: usize,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line_number, self.what)?;
        let mut dropped = Vec::new();
        if self.dropped_stacks > 0 {
            dropped.push(format!(
                "{} stack(s) without their counts",
                self.dropped_stacks
            ));
        }
        if self.dropped_bytes > 0 {
            dropped.push(format!("the cut line ({} bytes)", self.dropped_bytes));
        }
        if dropped.is_empty() {
            write!(f, "; read what is there (nothing was dropped)")
        } else {
            write!(f, "; dropped {}", dropped.join(" and "))
        }
    }
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

    let kind = match lines.next_skipping_percent()? {
        None => return Err(not_heap("the input is empty")),
        Some((_, line)) if line.starts_with(b"--- symbol") || is_marker(line, b"symbol") => {
            First::Symbols
        }
        Some((_, line)) if is_marker(line, b"heap") => First::HeapMarker,
        Some((no, line)) => First::Header(read_header(no, line)),
    };
    let mut header = match kind {
        First::Header(header) => Some(header?),
        First::HeapMarker => None,
        First::Symbols => {
            profile.symbols = Some(read_symbols(&mut lines)?);
            None
        }
    };
    if header.is_none() {
        // After `--- symbol … ---` or `--- heap`: an optional `--- heap`/`--- growth`, then the
        // header. A symbolized dump whose header is wrong is malformed, not another format.
        let symbolized = profile.symbols.is_some();
        let mut next = lines.next_skipping_percent()?;
        if symbolized {
            if let Some((_, l)) = next {
                if is_marker(l, b"heap") || is_marker(l, b"growth") {
                    next = lines.next_skipping_percent()?;
                }
            }
        }
        let Some((no, line)) = next else {
            return Err(not_heap("no heap_v2 header after the symbol section"));
        };
        if symbolized && (line.starts_with(b"--- symbol") || is_marker(line, b"symbol")) {
            return Err(malformed(
                no,
                line,
                "one `--- symbol` section only (a second `--- symbol` starts here)",
            ));
        }
        header = Some(match read_header(no, line) {
            Err(Error::NotHeapV2 { .. }) if symbolized => Err(malformed(
                no,
                line,
                "the header `heap_v2/<sample period>` after the symbol section",
            )),
            other => other,
        }?);
    }
    profile.sample_period = header.unwrap_or_default();
    let truncation = read_body(&mut lines, &mut profile, options, &mut on_stack)?;
    take_sample_period(&mut profile);
    Ok(Read {
        profile,
        truncation,
    })
}

/// A dump whose header period was chosen for rounding records the sampling period in a
/// `sample_period` annotation: that is the profile's period. Annotations come before the first
/// stack, so this is final once a stack is seen.
fn take_sample_period(profile: &mut Profile) {
    if let Some(i) = profile
        .annotations
        .iter()
        .position(|(k, _)| k == "sample_period")
    {
        if let Ok(period) = profile.annotations[i].1.parse::<u64>() {
            profile.sample_period = period;
            profile.annotations.remove(i);
        }
    }
}

/// What the first line of a dump is.
enum First {
    Symbols,
    HeapMarker,
    Header(Result<u64, Error>),
}

/// `--- <name>` as jeprof matches it: `^--- *<name>`.
fn is_marker(line: &[u8], name: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"---") else {
        return false;
    };
    let rest = trim_start(rest);
    rest.starts_with(name)
}

fn not_heap(found: &str) -> Error {
    Error::NotHeapV2 {
        file: None,
        found: found.to_string(),
    }
}

fn malformed(line_number: usize, line: &[u8], expected: &str) -> Error {
    let text = String::from_utf8_lossy(line);
    let shown: String = text.chars().take(200).collect();
    Error::Malformed {
        file: None,
        line_number,
        line: shown,
        expected: expected.to_string(),
    }
}

fn read_header(line_number: usize, line: &[u8]) -> Result<u64, Error> {
    let text = std::str::from_utf8(line).unwrap_or("");
    if let Some(c) = header_regex().captures(text) {
        return c[1].parse::<u64>().map_err(|_| {
            malformed(
                line_number,
                line,
                "a sample period that fits in 64 bits after `heap_v2/`",
            )
        });
    }
    if line.starts_with(b"heap_v2") {
        return Err(malformed(
            line_number,
            line,
            "the header `heap_v2/<sample period>`",
        ));
    }
    let found = if line.starts_with(b"heap profile:") {
        "a gperftools (legacy) heap profile, not jemalloc's heap_v2".to_string()
    } else if line.starts_with(b"heap") {
        format!(
            "header {:?}; only `heap_v2/<period>` is understood",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        )
    } else if line.iter().any(|&b| b == 0 || (b < 0x20 && b != b'\t')) {
        "binary data (a CPU profile or another binary file?)".to_string()
    } else {
        format!(
            "first line {:?} is not a `heap_v2/<period>` header",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        )
    };
    Err(Error::NotHeapV2 { file: None, found })
}

fn read_symbols(lines: &mut Lines<impl BufRead>) -> Result<SymbolTable, Error> {
    let mut table = SymbolTable::default();
    // `# line` positions as written (address, position in the `--` list, line), placed once the
    // section is read: a position counts from the outer function, the model from the innermost.
    let mut positions: Vec<(u64, usize, SourceLine)> = Vec::new();
    while let Some((no, line)) = lines.next()? {
        if line.starts_with(b"---") {
            if is_marker(line, b"symbol") {
                return Err(malformed(
                    no,
                    line,
                    "`---` closing the symbol section (a second `--- symbol` starts here)",
                ));
            }
            place_source_lines(&mut table, positions);
            return Ok(table);
        }
        let text = std::str::from_utf8(line)
            .map_err(|_| malformed(no, line, "a UTF-8 symbol line `0x<address> <name>`"))?;
        if text.trim().is_empty() {
            continue;
        }
        if let Some(rest) = text.strip_prefix("# line ") {
            positions.push(parse_source_line(rest).ok_or_else(|| {
                malformed(
                    no,
                    line,
                    "a source line `# line 0x<address> <position> <line> <file>`",
                )
            })?);
        } else if text.starts_with('#') {
            // Other comments: jeprof ignores every line it does not recognise, and so do we.
        } else if let Some((digits, names)) = split_symbol_line(text) {
            let address = parse_hex(digits.as_bytes())
                .ok_or_else(|| malformed(no, line, "a symbol address that fits in 64 bits"))?;
            // jeprof's form is `outer--inlined--more_inlined`; the model holds innermost first.
            // Sized exactly: collecting from `split` would reserve room for four names, tripling
            // the memory a section of a million one-name entries takes.
            let text = names.trim_end();
            let mut names: Vec<String> = match separators(text.as_bytes()) {
                0 => vec![text.to_string()],
                n => {
                    let mut names = Vec::with_capacity(n + 1);
                    names.extend(text.split("--").map(str::to_string));
                    names
                }
            };
            names.reverse();
            table.names.insert(address, names);
        } else if let Some(value) = text.strip_prefix("binary=") {
            table.binary = Some(value.trim().to_string());
        } else if text
            .split_once('=')
            .is_some_and(|(k, _)| k.starts_with(|c: char| c.is_ascii_lowercase()))
        {
            // jeprof warns about and ignores unknown `variable=value` lines; so do we.
        } else {
            return Err(malformed(
                no,
                line,
                "a symbol line `0x<address> <name>`, `binary=<name>`, or `---`",
            ));
        }
    }
    Err(not_heap(
        "a `--- symbol` section with no heap profile after it",
    ))
}

/// `0x<address> <position> <line> <file>` of a `# line` symbol line (`crate::write` writes them).
fn parse_source_line(text: &str) -> Option<(u64, usize, SourceLine)> {
    let (address, rest) = text.split_once(' ')?;
    let (position, rest) = rest.split_once(' ')?;
    let (number, file) = rest.split_once(' ')?;
    let address = parse_hex(address.strip_prefix("0x")?.as_bytes())?;
    let file = file.trim_end_matches(['\r', '\n']);
    if file.is_empty() {
        return None;
    }
    let source = SourceLine {
        file: file.to_string(),
        line: number.parse().ok()?,
    };
    Some((address, position.parse().ok()?, source))
}

/// Puts each `# line` position beside the name it belongs to; a position for an address or a
/// name the section does not have is dropped (it describes nothing a report shows).
fn place_source_lines(table: &mut SymbolTable, positions: Vec<(u64, usize, SourceLine)>) {
    for (address, position, source) in positions {
        let Some(names) = table.names.get(&address) else {
            continue;
        };
        let Some(i) = names.len().checked_sub(position + 1) else {
            continue;
        };
        let slots = table
            .lines
            .entry(address)
            .or_insert_with(|| vec![None; names.len()]);
        slots[i] = Some(source);
    }
}

/// Where the body's reading stands when the input ends, to tell a complete dump from a cut one.
#[derive(Default)]
struct BodyEnd {
    /// The dump says it was written by [`crate::write`], which ends every dump with [`END_MARKER`].
    announced_end_marker: bool,
    end_marker: bool,
    maps: bool,
}

/// Where the stacks of a dump go as they are completed: `on_stack`, in order, each checked first.
struct StackSink<'f, F> {
    on_stack: &'f mut F,
    /// Stacks completed so far: the index [`Profile::validate`] would name the next one by.
    completed: usize,
    /// The first stack whose figures are not valid. [`read_with`] checks the figures once the
    /// whole dump is read, so an error on a later line is the one reported; this keeps that order.
    invalid: Option<Error>,
}

impl<F: FnMut(&Profile, Stack)> StackSink<'_, F> {
    fn complete(&mut self, profile: &Profile, stack: Stack) {
        let index = self.completed;
        self.completed += 1;
        if self.invalid.is_some() {
            return;
        }
        match crate::model::validate_stack(index, &stack) {
            Ok(()) => (self.on_stack)(profile, stack),
            Err(e) => self.invalid = Some(e),
        }
    }
}

fn read_body<F: FnMut(&Profile, Stack)>(
    lines: &mut Lines<impl BufRead>,
    profile: &mut Profile,
    options: &ReadOptions,
    on_stack: &mut F,
) -> Result<Option<Truncation>, Error> {
    let period = profile.sample_period;
    let mut sink = StackSink {
        on_stack,
        completed: 0,
        invalid: None,
    };
    // The stack entry that counts lines currently belong to: the last one read. It is complete,
    // and handed over, when the next one starts or the body ends.
    let mut current: Option<Stack> = None;
    // The line of the current stack, while it has no `t*` counts line yet (a stack without figures
    // is an orphan: an error, or the cut end of a dump).
    let mut awaiting_counts: Option<usize> = None;
    // Whether the current entry carried a `# var` line (then per-line variance estimates are not used).
    let mut current_has_variance = false;
    // The header's `t*` total (jeprof never reads it) has been seen.
    let mut header_total = false;
    let mut end = BodyEnd::default();
    let mut cut_line: Option<(usize, usize)> = None;
    while let Some((no, raw, unterminated)) = lines.next_line()? {
        if unterminated {
            // The last line has no newline: the dump was cut inside it, and what it holds (part of
            // a number, part of a stack) cannot be trusted.
            cut_line = Some((no, raw.len()));
            break;
        }
        if end.end_marker {
            return Err(malformed(no, raw, &format!("nothing after `{END_MARKER}`")));
        }
        if raw.starts_with(b"MAPPED_LIBRARIES:") || raw.starts_with(b"--- Memory map:") {
            if let Some(at) = awaiting_counts {
                return Err(orphan_stack(at));
            }
            // The stacks end here: the last one is handed over before the map is read.
            if let Some(stack) = current.take() {
                sink.complete(profile, stack);
            }
            let (maps, maps_end) = lines.rest_as_maps()?;
            profile.mapped_libraries = Some(maps);
            end.maps = true;
            end.end_marker = maps_end.end_marker;
            cut_line = maps_end.cut_line;
            break;
        }
        let line = trim(raw);
        if line.is_empty() {
            continue;
        }
        if line[0] == b'@' {
            if let Some(at) = awaiting_counts {
                return Err(orphan_stack(at));
            }
            let mut frames = parse_frames(no, raw, &line[1..])?;
            if frames.is_empty() {
                // jeprof: a bare `@` does not match `^@\s+(.*)$`, so the current stack is unchanged.
                let Some(previous) = &current else {
                    return Err(malformed(
                        no,
                        raw,
                        "a stack before the first bare `@` (jeprof would give its counts to no \
                         stack, dropping them)",
                    ));
                };
                frames = previous.frames.clone();
            }
            match current.take() {
                Some(previous) => sink.complete(profile, previous),
                // The annotations are all read: the period is final before any stack is seen.
                None => take_sample_period(profile),
            }
            current = Some(Stack {
                frames,
                ..Stack::default()
            });
            awaiting_counts = Some(no);
            current_has_variance = false;
            continue;
        }
        if line[0] == b'#' {
            if line == END_MARKER.as_bytes() {
                if let Some(at) = awaiting_counts {
                    return Err(orphan_stack(at));
                }
                end.end_marker = true;
                continue;
            }
            // A label's value is the rest of the line verbatim, so it is cut from the raw line.
            // The word is found as every other comment's is (after `#` and any blanks): were
            // `#label k v` an annotation here, written back as `# label k v: …` it would read as a
            // label.
            let after_hash = trim_start(&trim_start(raw)[1..]);
            if let Some(rest) = after_hash.strip_prefix(crate::labels::WORD.as_bytes()) {
                read_label(no, raw, rest, profile, current.is_some())?;
                continue;
            }
            let text = String::from_utf8_lossy(&line[1..]).trim().to_string();
            if let Some(rest) = text.strip_prefix("var ") {
                let Some(stack) = &mut current else {
                    return Err(malformed(
                        no,
                        raw,
                        "a `# var` line only after a `@` stack line",
                    ));
                };
                let v = parse_variance(rest).ok_or_else(|| {
                    malformed(
                        no,
                        raw,
                        "`# var <objects> <bytes> <objects> <bytes>` (four reals)",
                    )
                })?;
                let counts = &mut stack.counts;
                counts.inuse.objects_variance = v[0];
                counts.inuse.bytes_variance = v[1];
                counts.accum.objects_variance = v[2];
                counts.accum.bytes_variance = v[3];
                current_has_variance = true;
            } else if let Some(rest) = text.strip_prefix("scope ") {
                let Some(stack) = &current else {
                    return Err(malformed(
                        no,
                        raw,
                        "a `# scope` line only after a `@` stack line",
                    ));
                };
                let (inuse, scope) = crate::scopes::parse_scope_line(rest).ok_or_else(|| {
                    malformed(
                        no,
                        raw,
                        "`# scope <objects> <bytes> <objects variance> <bytes variance> <label>`",
                    )
                })?;
                profile.scopes.push(crate::model::ScopeStack {
                    scope,
                    frames: stack.frames.clone(),
                    inuse,
                });
            } else if current.is_none() {
                if let Some((k, v)) = text.split_once(':') {
                    let (k, v) = (k.trim(), v.trim());
                    if k == WRITER_KEY && v == WRITER {
                        end.announced_end_marker = true;
                    } else {
                        profile.annotations.push((k.to_string(), v.to_string()));
                    }
                }
            }
            continue;
        }
        if line[0] == b't' {
            let parsed = match fast_counts(line) {
                Some(parsed) => parsed,
                None => slow_counts(no, raw, line)?,
            };
            let CountsLine {
                thread,
                values: v,
                name,
            } = parsed;
            let name = name.map(str::to_string);
            if (v[0] > 0 && v[1] == 0) || (v[2] > 0 && v[3] == 0) {
                return Err(malformed(
                    no,
                    raw,
                    "bytes above zero wherever objects are (jeprof divides by zero on this line)",
                ));
            }
            let counts = decode_counts(&v, period);
            match &mut current {
                None => {
                    if let Some(thread) = thread {
                        profile.threads.push(ThreadSummary {
                            thread,
                            counts,
                            name,
                        });
                    } else if name.is_some() {
                        return Err(malformed(no, raw, "nothing after `]` on a `t*` line"));
                    } else if header_total || !profile.threads.is_empty() {
                        return Err(malformed(
                            no,
                            raw,
                            "a `@ 0x…` stack line before these counts (a `t*` line here belongs \
                             to no stack)",
                        ));
                    } else {
                        header_total = true;
                    }
                }
                Some(stack) => {
                    if name.is_some() {
                        return Err(malformed(
                            no,
                            raw,
                            "nothing after `]` (only header thread lines carry a name)",
                        ));
                    }
                    if thread.is_none() {
                        if awaiting_counts.take().is_none() {
                            return Err(malformed(
                                no,
                                raw,
                                "a `@ 0x…` stack line before these counts (this stack already \
                                 has its `t*` line)",
                            ));
                        }
                        let before = stack.counts;
                        stack.counts.add(&counts);
                        if current_has_variance {
                            // Variance came from the `# var` line; keep it.
                            stack.counts.inuse.objects_variance = before.inuse.objects_variance;
                            stack.counts.inuse.bytes_variance = before.inuse.bytes_variance;
                            stack.counts.accum.objects_variance = before.accum.objects_variance;
                            stack.counts.accum.bytes_variance = before.accum.bytes_variance;
                        }
                    } else if let Some(thread) = thread {
                        if let Some(at) = awaiting_counts {
                            return Err(malformed(
                                no,
                                raw,
                                &format!(
                                    "the stack's `t*` line before its per-thread lines (stack at \
                                     line {at})"
                                ),
                            ));
                        }
                        stack.threads.push(ThreadCounts { thread, counts });
                    }
                }
            }
            continue;
        }
        return Err(malformed(no, raw, BODY_EXPECTED));
    }

    // The input has ended. The last stack is complete if it has its figures; if not, the dump was
    // cut (below) and the stack is dropped.
    if awaiting_counts.is_none() {
        if let Some(stack) = current.take() {
            sink.complete(profile, stack);
        }
    }
    // Complete, or cut while being written?
    let last = lines.number;
    let mut dropped_stacks = 0;
    let what = if let Some((line, bytes)) = cut_line {
        // An incomplete line inside the memory map loses one mapping; in the body, a cut `@` line
        // loses its stack (pushed before it was known to be cut: it was not) and a cut counts line
        // its figures.
        Some((
            line,
            bytes,
            format!("the dump ends in the middle of line {line} (no newline): it was cut"),
        ))
    } else if let Some(at) = awaiting_counts {
        Some((
            at,
            0,
            format!("the dump ends after the stack at line {at}, before its counts: it was cut"),
        ))
    } else if end.announced_end_marker && !end.end_marker {
        Some((
            last,
            0,
            format!(
                "the dump ends at line {last} without `{END_MARKER}`, which its writer puts last: \
                 it was cut"
            ),
        ))
    } else if !end.end_marker && !end.maps {
        Some((
            last,
            0,
            format!(
                "the dump ends at line {last} without the `MAPPED_LIBRARIES:` section that \
                 jemalloc writes last: it was cut"
            ),
        ))
    } else {
        None
    };
    let Some((line_number, dropped_bytes, what)) = what else {
        return match sink.invalid {
            Some(e) => Err(e),
            None => Ok(None),
        };
    };
    if !options.allow_truncated {
        return Err(Error::Truncated {
            file: None,
            line_number,
            what,
        });
    }
    if awaiting_counts.is_some() {
        // `current`, read without its figures, is not handed over.
        dropped_stacks += 1;
    }
    if let Some(e) = sink.invalid {
        return Err(e);
    }
    Ok(Some(Truncation {
        line_number,
        what,
        dropped_stacks,
        dropped_bytes,
    }))
}

/// A `# label <key> <value>` line (`rest` follows `# label `), added to `profile.labels`. Labels
/// come before the first stack, so that a streaming reader has them all with the first stack.
fn read_label(
    no: usize,
    raw: &[u8],
    rest: &[u8],
    profile: &mut Profile,
    after_a_stack: bool,
) -> Result<(), Error> {
    if after_a_stack {
        return Err(malformed(
            no,
            raw,
            "`# label` lines only before the first `@` stack line",
        ));
    }
    let text = std::str::from_utf8(rest)
        .map_err(|_| malformed(no, raw, "a UTF-8 label `# label <key> <value>`"))?;
    let (key, value) = crate::labels::parse_line(text).map_err(|problem| {
        malformed(
            no,
            raw,
            &format!("a label `# label <key> <value>` ({problem})"),
        )
    })?;
    if profile.labels.iter().any(|(k, _)| *k == key) {
        return Err(malformed(
            no,
            raw,
            &format!("each label key once (`{key}` is repeated)"),
        ));
    }
    profile.labels.push((key, value));
    Ok(())
}

fn orphan_stack(at: usize) -> Error {
    Error::Malformed {
        file: None,
        line_number: at,
        line: String::new(),
        expected: "a `t*: <objects>: <bytes> [<objects>: <bytes>]` counts line after this stack \
                   (it has none)"
            .to_string(),
    }
}

/// A parsed counts line: `None` for the `t*` thread.
struct CountsLine<'a> {
    thread: Option<u64>,
    values: [u64; 4],
    name: Option<&'a str>,
}

/// The canonical form jemalloc writes, `t<uid|*>: <n>: <s> [<n>: <s>]` with single spaces and an
/// optional ` <name>`, parsed without the regex (the reader's hot loop). Anything else, or a number
/// that overflows, returns `None` and goes through [`slow_counts`], which is the authority.
fn fast_counts(line: &[u8]) -> Option<CountsLine<'_>> {
    let mut pos = 1;
    let thread = if line.get(pos) == Some(&b'*') {
        pos += 1;
        None
    } else {
        Some(digits(line, &mut pos)?)
    };
    let mut values = [0u64; 4];
    for (k, separator) in [b": ", b": ", b" [", b": "].into_iter().enumerate() {
        if line.get(pos..pos + 2)? != separator {
            return None;
        }
        pos += 2;
        values[k] = digits(line, &mut pos)?;
    }
    if line.get(pos) != Some(&b']') {
        return None;
    }
    pos += 1;
    let name = match line.get(pos) {
        None => None,
        Some(b' ') => Some(std::str::from_utf8(&line[pos + 1..]).ok()?.trim()),
        Some(_) => return None,
    };
    if name.is_some_and(str::is_empty) {
        return None;
    }
    Some(CountsLine {
        thread,
        values,
        name,
    })
}

fn digits(line: &[u8], pos: &mut usize) -> Option<u64> {
    let start = *pos;
    let mut value: u64 = 0;
    while let Some(&d) = line.get(*pos) {
        if !d.is_ascii_digit() {
            break;
        }
        value = value.checked_mul(10)?.checked_add((d - b'0') as u64)?;
        *pos += 1;
    }
    (*pos > start).then_some(value)
}

/// The regex path: every counts line jeprof accepts, and the error for the ones it does not.
fn slow_counts<'a>(no: usize, raw: &[u8], line: &'a [u8]) -> Result<CountsLine<'a>, Error> {
    let text = std::str::from_utf8(line).map_err(|_| malformed(no, raw, COUNTS_EXPECTED))?;
    let c = counts_regex()
        .captures(text)
        .ok_or_else(|| malformed(no, raw, COUNTS_EXPECTED))?;
    let mut values = [0u64; 4];
    for (k, slot) in values.iter_mut().enumerate() {
        *slot = c[k + 2].parse::<u64>().map_err(|_| {
            malformed(
                no,
                raw,
                "counts that fit in 64 bits (at most 18446744073709551615)",
            )
        })?;
    }
    let thread = match c.get(1).map(|m| m.as_str()) {
        Some("*") | None => None,
        Some(t) => Some(
            t.parse::<u64>()
                .map_err(|_| malformed(no, raw, "a thread uid that fits in 64 bits"))?,
        ),
    };
    Ok(CountsLine {
        thread,
        values,
        name: c.get(6).map(|m| m.as_str()),
    })
}

/// Decodes one `n1: s1 [n2: s2]` line the way jeprof does, with the variance estimated as if every
/// sample behind the entry had the entry's average size (all a jemalloc dump allows).
fn decode_counts(v: &[u64; 4], period: u64) -> Counts {
    let estimate = |n: u64, s: u64| {
        let (objects, bytes, objects_variance, bytes_variance) =
            math::jeprof_unbias_with_variance(n, s, period);
        Estimate {
            objects,
            bytes,
            objects_variance,
            bytes_variance,
        }
    };
    Counts {
        inuse: estimate(v[0], v[1]),
        accum: estimate(v[2], v[3]),
    }
}

fn parse_variance(text: &str) -> Option<[f64; 4]> {
    let mut out = [0.0; 4];
    let mut it = text.split_ascii_whitespace();
    for slot in &mut out {
        let v: f64 = it.next()?.parse().ok()?;
        if !v.is_finite() || v < 0.0 {
            return None;
        }
        *slot = v;
    }
    it.next().is_none().then_some(out)
}

/// The addresses of a `@` line, in one pass over its bytes (the reader's hottest loop): tokens
/// separated by whitespace, each `0x` (or `0X`, or nothing) and at most 16 significant hex digits.
fn parse_frames(no: usize, raw: &[u8], rest: &[u8]) -> Result<Vec<u64>, Error> {
    let bad = || {
        malformed(
            no,
            raw,
            "hexadecimal frame addresses of at most 64 bits (`0x…`)",
        )
    };
    if !rest.is_empty() && !rest[0].is_ascii_whitespace() {
        return Err(malformed(no, raw, "a space after `@`"));
    }
    // Sized for jemalloc's (and our) single-space form, so that a million stacks hold their frames
    // and not spare capacity.
    let mut frames = Vec::with_capacity(memchr::memchr_iter(b' ', rest).count().max(1));
    let mut i = 0;
    while i < rest.len() {
        if rest[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if rest[i] == b'0' && rest.get(i + 1).is_some_and(|&x| x | 0x20 == b'x') {
            i += 2;
        }
        let start = i;
        let (mut value, mut significant) = (0u64, 0u32);
        while let Some(&byte) = rest.get(i) {
            let digit = HEX[byte as usize];
            if digit > 15 {
                break;
            }
            significant += u32::from(significant > 0 || digit != 0);
            value = (value << 4) | u64::from(digit);
            i += 1;
        }
        let ends_token = rest.get(i).is_none_or(u8::is_ascii_whitespace);
        if i == start || significant > 16 || !ends_token {
            return Err(bad());
        }
        frames.push(value);
    }
    Ok(frames)
}

fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    // At most 16 significant digits; leading zeros are allowed (jeprof strips them).
    let significant = &digits[digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(digits.len())..];
    if significant.len() > 16 {
        return None;
    }
    let mut value: u64 = 0;
    for &d in digits {
        let nibble = HEX[d as usize];
        if nibble > 15 {
            return None;
        }
        value = (value << 4) | nibble as u64;
    }
    Some(value)
}

/// Hex digit values, 0xff for anything else.
const HEX: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

fn trim(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &line[start..end]
}

fn trim_start(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[start..]
}

/// Lines with their 1-based numbers, `\r` removed as jeprof does, read one at a time into a buffer
/// that is reused (memory: the longest line, never the input).
struct Lines<R> {
    input: R,
    buffer: Vec<u8>,
    number: usize,
}

/// A line's number, its text, and whether it is cut (the input's last, with no newline).
type CutLine<'a> = (usize, &'a [u8], bool);

/// How a memory map section ends.
struct MapsEnd {
    end_marker: bool,
    cut_line: Option<(usize, usize)>,
}

impl<R: BufRead> Lines<R> {
    fn new(input: R) -> Lines<R> {
        Lines {
            input,
            buffer: Vec::with_capacity(256),
            number: 0,
        }
    }

    /// The next line, without its newline; `None` at the end of the input.
    fn next(&mut self) -> Result<Option<(usize, &[u8])>, Error> {
        Ok(self.next_line()?.map(|(no, line, _)| (no, line)))
    }

    /// [`Lines::next`], and whether the line is the input's last and has no newline (was cut).
    fn next_line(&mut self) -> Result<Option<CutLine<'_>>, Error> {
        self.buffer.clear();
        let limit = MAX_LINE as u64 + 1;
        let read = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buffer)?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        let mut line = &self.buffer[..];
        // Only the input's last line can lack its newline.
        let unterminated = match line.strip_suffix(b"\n") {
            Some(l) => {
                line = l;
                false
            }
            None if read as u64 == limit => {
                return Err(malformed(
                    self.number,
                    &line[..200],
                    &format!("lines of at most {MAX_LINE} bytes (a dump is text)"),
                ))
            }
            None => true,
        };
        // jeprof removes every `\r`; the only place jemalloc could write one is a thread name, so
        // stripping trailing ones is equivalent for any dump jemalloc writes.
        while let Some(l) = line.strip_suffix(b"\r") {
            line = l;
        }
        Ok(Some((self.number, line, unterminated)))
    }

    /// The next line that does not start with `%` (jeprof's `ReadProfileHeader` skips those).
    fn next_skipping_percent(&mut self) -> Result<Option<(usize, &[u8])>, Error> {
        loop {
            // The line's length rather than the line, so that the borrow ends with each round.
            let Some((no, len, percent)) = self
                .next()?
                .map(|(no, line)| (no, line.len(), line.starts_with(b"%")))
            else {
                return Ok(None);
            };
            if !percent {
                return Ok(Some((no, &self.buffer[..len])));
            }
        }
    }

    /// The memory map: every line after the current one, `\r` removed, up to [`END_MARKER`] (which
    /// must then be last) or the end of the input.
    fn rest_as_maps(&mut self) -> Result<(String, MapsEnd), Error> {
        let mut maps = String::new();
        let mut end = MapsEnd {
            end_marker: false,
            cut_line: None,
        };
        while let Some((no, line, unterminated)) = self.next_line()? {
            if unterminated {
                end.cut_line = Some((no, line.len()));
                break;
            }
            if end.end_marker {
                return Err(malformed(
                    no,
                    line,
                    &format!("nothing after `{END_MARKER}`"),
                ));
            }
            // The line as it is kept (and written again): compared with the marker after the
            // `\r`s are gone, or a map line `# \r…end of dump` would be kept as `# end of dump`
            // and read back as the marker.
            let text = String::from_utf8_lossy(line).replace('\r', "");
            if text == END_MARKER {
                end.end_marker = true;
                continue;
            }
            if maps.len() + text.len() >= MAX_MAPS {
                return Err(malformed(
                    no,
                    line,
                    &format!("a memory map of at most {MAX_MAPS} bytes"),
                ));
            }
            maps.push_str(&text);
            maps.push('\n');
        }
        Ok((maps, end))
    }
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
    fn separators_count_the_pieces_split_makes() {
        for text in [
            "", "a", "-", "--", "---", "----", "a--b", "a---b", "--a--", "a-b--c-",
        ] {
            assert_eq!(
                separators(text.as_bytes()) + 1,
                text.split("--").count(),
                "{text:?}"
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

    #[test]
    fn a_map_line_that_is_the_end_marker_once_its_crs_are_gone_is_the_marker() {
        // The map keeps its lines with every `\r` removed, as jeprof reads them; a line that is
        // `# end of dump` after that must end the map, not be kept and written back as one.
        let text = b"heap_v2/524288\n  t*: 2: 1048576 [0: 0]\nMAPPED_LIBRARIES:\n\
                     00400000-00402000 r-xp 00000000 08:01 1234 /usr/bin/kv\n# \r\rend of dump\n";
        let profile = parse(text).expect("a whole dump");
        let maps = profile.mapped_libraries.as_deref().unwrap_or_default();
        assert!(!maps.contains("end of dump"), "{maps:?}");
        let err = parse(&[text.as_slice(), b"# end of dump\n"].concat()).expect_err("two markers");
        assert!(err.to_string().contains("nothing after"), "{err}");
    }
}
