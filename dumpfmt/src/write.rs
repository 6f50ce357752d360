//! Writing heap_v2 dumps that legacy jeprof reports correctly.
//!
//! The writer prints the grammar of [`crate::syntax`] (`docs/design.md` §5 and §6), section by
//! section as [`crate::read`] reads it back: the symbol section, the header with its thread lines,
//! the comments before the first stack (the writer's announcement, annotations, labels), the stack
//! entries with their counts, `# var` and `# scope` lines, the memory map, and
//! [`END_MARKER`] last, so that a reader knows it has the whole dump.
//!
//! Every `(n, s)` comes from [`crate::encode::encode_pair`]; a stack whose best encoding needs several
//! entries is written as several `@` records with the same frames, which jeprof (and every other
//! reader we know of) adds up. Hex is lowercase (jeprof's caller adjustment lowercases, an uppercase
//! leaf would become a different key), a stack never has zero frames (jeprof would give its counts to
//! the previous stack), and no line ever has objects without bytes (jeprof would divide by zero).

use std::io::{self, Write};
use std::path::Path;

use crate::encode::{encode_pair, relative_error, Pair, Rounding};
use crate::error::Error;
use crate::model::{Counts, Profile, ScopeStack, SourceLine, Stack, SymbolTable};
use crate::syntax::{self, END_MARKER};

/// Choices for [`write()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// How figures become integers; see [`crate::encode`].
    pub rounding: Rounding,
    /// Write the profile's symbol table (if it has one) as a `--- symbol` section, so that
    /// `jeprof --text <dump>` needs no binary.
    pub symbols: bool,
    /// Which period to put in the `heap_v2/<R>` header.
    pub header_period: HeaderPeriod,
    /// Threads that encode the stacks' figures (the search of [`crate::encode`], most of a large
    /// merged dump's writing): 1 (the default) encodes on the calling thread and starts none. The
    /// dump is the same byte for byte whatever the number.
    pub jobs: usize,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            rounding: Rounding::Optimal,
            symbols: true,
            header_period: HeaderPeriod::Auto,
            jobs: 1,
        }
    }
}

/// The period written in the header. jeprof scales every entry with it, but the figures it prints
/// are the profile's unbiased ones whatever it is (that is what the encoding is for), so it is free to
/// choose for accuracy. The profile's true sampling period is always recorded as the
/// `# sample_period: <R>` annotation, which [`crate::read`] restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderPeriod {
    /// The profile's sampling period, as jemalloc writes.
    Sampling,
    /// This period.
    Fixed(u64),
    /// The period among R, R/2, …, R/64 whose encoding has the smallest worst error over the stacks
    /// of at least 2·R ([`choose_header_period`]). Smaller periods give small-object stacks of a few R
    /// many more entries to round with; the sampling period itself is best for stacks of a few large
    /// samples, whose fractional object counts only a period near their size can express.
    Auto,
}

/// The worst relative error, over stacks holding at least `2·R` bytes (in use or accumulated), of the
/// figures jeprof computes from this profile written with `header` as the header period.
///
/// Stacks whose `n_c` at the sampling period is 64 or more are skipped: they encode within 10⁻⁴ at
/// any header period at most R (`n_c` only grows as the period shrinks), so they cannot decide the
/// choice, and skipping them keeps [`HeaderPeriod::Auto`] cheap on large merged profiles.
pub fn worst_error(profile: &Profile, header: u64, rounding: Rounding) -> f64 {
    let period = profile.sample_period as f64;
    let floor = 2.0 * period;
    let mut worst = 0.0f64;
    for stack in &profile.stacks {
        for e in [&stack.counts.inuse, &stack.counts.accum] {
            if e.bytes >= floor && crate::math::encode(e.objects, e.bytes, period).0 < 64.0 {
                let pairs = encode_pair(e.objects, e.bytes, header, rounding);
                worst = worst.max(relative_error(&pairs, e.objects, e.bytes, header));
            }
        }
    }
    worst
}

/// [`HeaderPeriod::Auto`]'s choice: keep the sampling period when its worst error is already below
/// 10⁻⁴; otherwise the candidate with the smallest worst error (the larger one on ties).
pub fn choose_header_period(profile: &Profile, rounding: Rounding) -> u64 {
    let period = profile.sample_period;
    let mut best = (worst_error(profile, period, rounding), period);
    if best.0 <= 1e-4 || period < 2 || rounding == Rounding::Nearest {
        return period;
    }
    for shift in 1..=6 {
        let candidate = period >> shift;
        if candidate == 0 {
            break;
        }
        let err = worst_error(profile, candidate, rounding);
        if err < best.0 * 0.9 {
            best = (err, candidate);
        }
    }
    best.1
}

/// Writes `profile` to `out`. The profile is validated first ([`Profile::validate`]).
///
/// Entries that share frames are added up before encoding ([`Profile::coalesce`]): jeprof adds them
/// anyway, and one encoding of the sum is as close as the format allows where separate encodings would
/// each carry their own rounding error.
pub fn write(profile: &Profile, out: &mut dyn Write, options: &WriteOptions) -> Result<(), Error> {
    profile.validate()?;
    let coalesced;
    let profile = if has_repeated_frames(profile) {
        let mut copy = profile.clone();
        copy.coalesce();
        coalesced = copy;
        &coalesced
    } else {
        profile
    };
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    write_unbuffered(profile, &mut out, options)?;
    out.flush()?;
    Ok(())
}

fn has_repeated_frames(profile: &Profile) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(profile.stacks.len());
    profile.stacks.iter().any(|s| !seen.insert(&s.frames))
}

/// The dump as a string.
pub fn to_string(profile: &Profile, options: &WriteOptions) -> Result<String, Error> {
    let mut buf = Vec::new();
    write(profile, &mut buf, options)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Writes the dump to `path` atomically ([`crate::output::AtomicFile`]): into a temporary file
/// created exclusively beside it (unpredictable name, mode 0600, never through a symlink), `fsync`ed,
/// then renamed over `path`, and the directory `fsync`ed. A reader never sees a half-written dump,
/// concurrent writers to one path all succeed (the last rename wins), and a failure leaves any
/// previous file at `path` untouched.
pub fn write_file(profile: &Profile, path: &Path, options: &WriteOptions) -> Result<(), Error> {
    crate::output::write_atomically(path, |file| {
        write(profile, file, options).map_err(|e| e.in_file(path))
    })
}

fn write_unbuffered(
    profile: &Profile,
    out: &mut impl Write,
    options: &WriteOptions,
) -> Result<(), Error> {
    let period = match options.header_period {
        HeaderPeriod::Sampling => profile.sample_period,
        HeaderPeriod::Fixed(p) => p,
        HeaderPeriod::Auto => choose_header_period(profile, options.rounding),
    };
    if options.symbols {
        if let Some(symbols) = &profile.symbols {
            write_symbols(out, symbols)?;
        }
    }
    write_header(out, profile, period)?;
    write_comments(out, profile, period)?;
    write_stacks(out, profile, period, options.rounding, options.jobs)?;
    if let Some(maps) = &profile.mapped_libraries {
        write_memory_map(out, maps)?;
    }
    // Last, so that a reader knows it has the whole dump (jeprof ignores the line, in the body and
    // in the memory map alike).
    writeln!(out, "{END_MARKER}")?;
    Ok(())
}

/// The symbol section, `--- symbol` … `---`, and the `--- heap` after it.
fn write_symbols(out: &mut impl Write, symbols: &SymbolTable) -> Result<(), Error> {
    let marker = syntax::MARKER;
    writeln!(out, "{marker} {}", syntax::SYMBOL)?;
    if let Some(binary) = &symbols.binary {
        writeln!(out, "{}{binary}", syntax::BINARY)?;
    }
    for (address, names) in &symbols.names {
        // jeprof's symbol line is `0x<address>\s+(.+)`: there is no way to write an address whose
        // names are all blank. It is left out, and reads back unsymbolized, as jeprof shows it.
        if names.iter().all(|name| name.trim().is_empty()) {
            continue;
        }
        write!(out, "0x{address:016x} ")?;
        // Outer function first, then the functions inlined into it.
        for (i, name) in names.iter().rev().enumerate() {
            if i > 0 {
                out.write_all(syntax::INLINE_SEPARATOR.as_bytes())?;
            }
            // A newline inside a name would end the symbol line early.
            out.write_all(name.replace(['\n', '\r'], " ").as_bytes())?;
        }
        writeln!(out)?;
        write_source_lines(out, *address, names.len(), symbols.lines.get(address))?;
    }
    writeln!(out, "{marker}")?;
    writeln!(out, "{marker} {}", syntax::HEAP)?;
    Ok(())
}

/// The header `heap_v2/<period>` and its thread lines. jeprof never reads these lines; jemalloc
/// encodes them once from the totals.
fn write_header(out: &mut impl Write, profile: &Profile, period: u64) -> Result<(), Error> {
    writeln!(
        out,
        "{}{}{period}",
        syntax::FORMAT,
        syntax::PERIOD_SEPARATOR
    )?;
    write_counts_line(out, None, &[plain(&profile.totals(), period)], 0, None)?;
    for t in &profile.threads {
        write_counts_line(
            out,
            Some(t.thread),
            &[plain(&t.counts, period)],
            0,
            t.name.as_deref(),
        )?;
    }
    Ok(())
}

/// The comments before the first stack: the writer's announcement, the sampling period when the
/// header has another, the annotations, the labels.
fn write_comments(out: &mut impl Write, profile: &Profile, period: u64) -> Result<(), Error> {
    // Tells our reader that this dump ends with `END_MARKER`, so that one cut anywhere (even
    // inside the memory map, at a line boundary) is known to be cut.
    write_annotation(out, syntax::WRITER_KEY, syntax::WRITER)?;
    if period != profile.sample_period {
        write_annotation(
            out,
            syntax::SAMPLE_PERIOD,
            &profile.sample_period.to_string(),
        )?;
    }
    for (k, v) in profile
        .annotations
        .iter()
        .filter(|(k, _)| k != syntax::SAMPLE_PERIOD && k != syntax::WRITER_KEY)
    {
        write_annotation(out, &annotation_key(k), &v.replace('\n', " "))?;
    }
    // Checked by `validate` above: keys are one word, values hold no line break.
    for (k, v) in &profile.labels {
        writeln!(out, "{}{k} {v}", syntax::LABEL_LINE_PREFIX)?;
    }
    Ok(())
}

/// `# <key>: <value>`, both already on one line.
fn write_annotation(out: &mut impl Write, key: &str, value: &str) -> io::Result<()> {
    let (comment, separator) = (syntax::COMMENT, syntax::ANNOTATION_SEPARATOR);
    writeln!(out, "{comment} {key}{separator} {value}")
}

/// Stacks encoded together when the encoding is spread over threads: a block's encodings are
/// held until it is written, so memory stays bounded whatever the number of stacks.
const ENCODING_BLOCK: usize = 8192;

/// Every stack, each followed by its per-scope figures. With `jobs > 1`, each block of stacks is
/// encoded by `jobs` scoped threads (contiguous shares), then written in order.
fn write_stacks(
    out: &mut impl Write,
    profile: &Profile,
    period: u64,
    rounding: Rounding,
    jobs: usize,
) -> Result<(), Error> {
    // Per-scope figures by frames, each written once, after the first entry with those frames.
    let mut scopes: std::collections::HashMap<&[u64], Vec<&ScopeStack>> =
        std::collections::HashMap::new();
    for s in &profile.scopes {
        scopes.entry(&s.frames).or_default().push(s);
    }
    let jobs = jobs.max(1);
    for block in profile
        .stacks
        .chunks(if jobs == 1 { 1 } else { ENCODING_BLOCK })
    {
        let encoded = encode_block(block, period, rounding, jobs);
        for (stack, encoded) in block.iter().zip(&encoded) {
            let scopes = scopes.remove(stack.frames.as_slice()).unwrap_or_default();
            write_stack(out, stack, encoded, &scopes)?;
        }
    }
    Ok(())
}

/// One stack's entries: the aggregate's `(inuse, accum)` pairs, and each thread's.
struct EncodedStack {
    aggregate: Vec<(Pair, Pair)>,
    threads: Vec<(u64, Vec<(Pair, Pair)>)>,
}

fn encode_stack(stack: &Stack, period: u64, rounding: Rounding) -> EncodedStack {
    EncodedStack {
        aggregate: encode_counts(&stack.counts, period, rounding),
        threads: stack
            .threads
            .iter()
            .map(|t| (t.thread, encode_counts(&t.counts, period, rounding)))
            .filter(|(_, e)| !e.is_empty())
            .collect(),
    }
}

/// `block`'s encodings in its order, on `jobs` threads when there is more than one stack each.
fn encode_block(
    block: &[Stack],
    period: u64,
    rounding: Rounding,
    jobs: usize,
) -> Vec<EncodedStack> {
    let encode = |stacks: &[Stack]| -> Vec<EncodedStack> {
        stacks
            .iter()
            .map(|s| encode_stack(s, period, rounding))
            .collect()
    };
    if jobs == 1 || block.len() < 2 * jobs {
        return encode(block);
    }
    let share = block.len().div_ceil(jobs);
    std::thread::scope(|scope| {
        let workers: Vec<_> = block
            .chunks(share)
            .map(|part| scope.spawn(move || encode(part)))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(encoded) => encoded,
                // The encoder does not panic on any finite or infinite figure; a panic is a bug,
                // carried on to the caller as it would be without threads.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// One stack as the entries its encoding needs, each a `@` line, its `t*` and per-thread counts
/// lines and its `# var` line; `scopes` after the first entry.
fn write_stack(
    out: &mut impl Write,
    stack: &Stack,
    encoded: &EncodedStack,
    scopes: &[&ScopeStack],
) -> Result<(), Error> {
    let EncodedStack { aggregate, threads } = encoded;
    let records = threads
        .iter()
        .map(|(_, e)| e.len())
        .chain([aggregate.len()])
        .max()
        .unwrap_or(0);
    for record in 0..records {
        write_frames(out, &stack.frames)?;
        write_counts_line(out, None, aggregate, record, None)?;
        for (thread, entries) in threads {
            if record < entries.len() {
                write_counts_line(out, Some(*thread), entries, record, None)?;
            }
        }
        write_variance_line(out, &stack.counts, record)?;
        if record == 0 {
            for s in scopes {
                write_scope_line(out, s)?;
            }
        }
    }
    Ok(())
}

/// The `# var` line of entry `record`: the stack's variances on its first entry (the reader keeps
/// them over the ones it would estimate from the counts), zeros on the others.
fn write_variance_line(out: &mut impl Write, c: &Counts, record: usize) -> io::Result<()> {
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
    let (comment, var) = (syntax::COMMENT, syntax::VAR);
    writeln!(
        out,
        "  {comment} {var} {:e} {:e} {:e} {:e}",
        v[0], v[1], v[2], v[3]
    )
}

/// A `@` line.
fn write_frames(out: &mut impl Write, frames: &[u64]) -> io::Result<()> {
    write!(out, "{}", syntax::STACK)?;
    if frames.is_empty() {
        // jeprof gives the counts of a bare `@` to the previous stack; an explicit null
        // frame keeps them apart.
        out.write_all(b" 0x0")?;
    }
    for frame in frames {
        write!(out, " 0x{frame:x}")?;
    }
    writeln!(out)
}

/// A `# scope` line ([`crate::scopes`]).
fn write_scope_line(out: &mut impl Write, s: &ScopeStack) -> io::Result<()> {
    let e = &s.inuse;
    let (comment, scope) = (syntax::COMMENT, syntax::SCOPE);
    writeln!(
        out,
        "  {comment} {scope} {:e} {:e} {:e} {:e} {}",
        e.objects,
        e.bytes,
        e.objects_variance,
        e.bytes_variance,
        crate::scopes::written_label(&s.scope)
    )
}

/// The memory map, after a blank line, with a newline at its end.
fn write_memory_map(out: &mut impl Write, maps: &str) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{}", syntax::MAPPED_LIBRARIES)?;
    out.write_all(maps.as_bytes())?;
    if !maps.is_empty() && !maps.ends_with('\n') {
        writeln!(out)?;
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

/// The `# line 0x<key> <pos> <line> <file>` lines of one symbol entry: the source position of the
/// name at position `pos` of its `--` list (0 is the outer function, as written), the file being
/// the rest of the line. jeprof's `ReadSymbols` ignores any line that is not `0x<hex> <names>`,
/// `---` or `variable=value`, so a line starting with `#` changes nothing in its reports
/// (`docs/design.md` §6). `lines` is innermost first, as [`crate::SymbolTable::names`].
fn write_source_lines(
    out: &mut impl Write,
    address: u64,
    names: usize,
    lines: Option<&Vec<Option<SourceLine>>>,
) -> Result<(), Error> {
    let Some(lines) = lines else {
        return Ok(());
    };
    for (i, line) in lines.iter().enumerate().take(names) {
        let Some(line) = line else { continue };
        // A newline inside the file name would end the line early.
        let file = line.file.replace(['\n', '\r'], " ");
        if file.is_empty() {
            continue;
        }
        let (comment, word) = (syntax::COMMENT, syntax::SOURCE_LINE);
        writeln!(
            out,
            "{comment} {word} 0x{address:016x} {} {} {file}",
            names - 1 - i,
            line.line
        )?;
    }
    Ok(())
}

/// A counts line `t<thread>: …` (`None`: all threads, `t*`) of entry `index` of `entries`, with the
/// thread's name (header thread lines only).
fn write_counts_line(
    out: &mut impl Write,
    thread: Option<u64>,
    entries: &[(Pair, Pair)],
    index: usize,
    name: Option<&str>,
) -> io::Result<()> {
    let (a, b) = entries.get(index).copied().unwrap_or((ZERO, ZERO));
    write!(out, "  {}", syntax::COUNTS)?;
    match thread {
        Some(thread) => write!(out, "{thread}")?,
        None => write!(out, "{}", syntax::ALL_THREADS)?,
    }
    write!(out, ": {}: {} [{}: {}]", a.n, a.s, b.n, b.s)?;
    if let Some(name) = name {
        write!(out, " {}", name.replace(['\n', '\r'], " "))?;
    }
    writeln!(out)
}

/// An annotation's key as written: on one line, without `:` (which ends the key), and never read
/// back as another kind of comment. The reader knows `# label`, `# var` and `# scope` lines by
/// their first word after `#` and blanks, so the blank after such a word becomes `_`
/// (`label x` → `label_x`); without that, an annotation would come back as a label, or a header
/// would stop reading at a `# var` line before any stack.
fn annotation_key(key: &str) -> String {
    let mut key = key.replace(['\n', syntax::ANNOTATION_SEPARATOR], " ");
    let start = key.len() - key.trim_start().len();
    for word in syntax::COMMENT_WORDS {
        let blank = start + word.len();
        if key[start..].starts_with(word) && key[blank..].starts_with(char::is_whitespace) {
            let width = key[blank..].chars().next().map_or(1, char::len_utf8);
            key.replace_range(blank..blank + width, "_");
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Estimate, Stack};

    fn stack_of(frames: Vec<u64>, size: f64, samples: usize, period: u64) -> Stack {
        let mut stack = Stack {
            frames,
            ..Stack::default()
        };
        for _ in 0..samples {
            stack
                .counts
                .inuse
                .add(&Estimate::of_sample(size, period as f64));
        }
        stack
    }

    #[test]
    fn auto_header_period_keeps_small_object_stacks_of_a_few_periods_within_a_ten_thousandth() {
        // A merged stack of small objects holding about 2.5·R (sums over many dumps fall anywhere,
        // unlike a few samples, which are exactly representable): at the sampling period it can
        // only be two entries, and jeprof would be percents off.
        let period = 1 << 19;
        let mut profile = Profile::new(period);
        let mut stack = stack_of(vec![0x1000, 0x2000], 16.0, 0, period);
        stack.counts.inuse = Estimate {
            objects: 81_148.5,
            bytes: 1_298_376.6,
            objects_variance: 1e6,
            bytes_variance: 3e9,
        };
        profile.stacks.push(stack);
        let at_sampling = worst_error(&profile, period, Rounding::Optimal);
        let chosen = choose_header_period(&profile, Rounding::Optimal);
        let at_chosen = worst_error(&profile, chosen, Rounding::Optimal);
        assert!(at_sampling > 1e-3, "{at_sampling}");
        assert!(chosen < period && at_chosen < 1e-4, "{chosen}: {at_chosen}");

        let text = to_string(&profile, &WriteOptions::default()).unwrap();
        assert!(text.contains(&format!("heap_v2/{chosen}\n")));
        let back = crate::read::parse(text.as_bytes()).unwrap();
        assert_eq!(back.sample_period, period, "the sampling period survives");
        let (want, got) = (profile.totals().inuse, back.totals().inuse);
        assert!((got.bytes - want.bytes).abs() / want.bytes < 1e-4);
        assert!((got.objects - want.objects).abs() / want.objects < 1e-4);
        assert!((got.bytes_variance - want.bytes_variance).abs() <= want.bytes_variance * 1e-12);
    }

    #[test]
    fn writer_never_emits_a_bare_at_or_objects_without_bytes() {
        let period = 1 << 19;
        let mut profile = Profile::new(period);
        profile.stacks.push(stack_of(vec![], 64.0, 2, period));
        profile.stacks.push(stack_of(vec![0xabc], 1e-9, 1, period));
        let text = to_string(&profile, &WriteOptions::default()).unwrap();
        for line in text.lines() {
            assert_ne!(line.trim(), "@");
            if let Some(rest) = line.trim().strip_prefix("t*: ") {
                let nums: Vec<u64> = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|t| !t.is_empty())
                    .map(|t| t.parse().unwrap())
                    .collect();
                assert!(
                    !(nums[0] > 0 && nums[1] == 0 || nums[2] > 0 && nums[3] == 0),
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn source_lines_survive_a_write_and_read_beside_their_names() {
        use crate::{SourceLine, SymbolTable};
        let period = 1 << 19;
        let mut profile = Profile::new(period);
        profile
            .stacks
            .push(stack_of(vec![0x1000, 0x2001], 4096.0, 1, period));
        let at = |file: &str, line| {
            Some(SourceLine {
                file: file.to_string(),
                line,
            })
        };
        let mut symbols = SymbolTable::default();
        // Innermost first: an inlined helper with a path holding spaces and `--`, its caller
        // unknown; one address with no positions at all.
        symbols.names.insert(
            0x1000,
            vec!["helper".into(), "middle".into(), "outer".into()],
        );
        symbols.lines.insert(
            0x1000,
            vec![at("src/my dir/a--b.rs", 7), None, at("src/main.rs", 42)],
        );
        symbols.names.insert(0x2000, vec!["main".into()]);
        profile.symbols = Some(symbols.clone());

        let text = to_string(&profile, &WriteOptions::default()).unwrap();
        assert!(text.contains("0x0000000000001000 outer--middle--helper\n"));
        assert!(text.contains("# line 0x0000000000001000 0 42 src/main.rs\n"));
        assert!(text.contains("# line 0x0000000000001000 2 7 src/my dir/a--b.rs\n"));
        let back = crate::read::parse(text.as_bytes()).unwrap();
        assert_eq!(back.symbols, Some(symbols));
    }

    #[test]
    fn an_address_whose_names_are_blank_is_left_out_and_the_dump_reads_back() {
        use crate::SymbolTable;
        let period = 1 << 19;
        let mut profile = Profile::new(period);
        profile
            .stacks
            .push(stack_of(vec![0x1000, 0x2000], 4096.0, 1, period));
        let mut symbols = SymbolTable::default();
        symbols.names.insert(0x1000, vec![String::new()]);
        symbols.names.insert(0x2000, vec!["main".into()]);
        profile.symbols = Some(symbols);

        let text = to_string(&profile, &WriteOptions::default()).unwrap();
        let back = crate::read::parse(text.as_bytes()).unwrap();
        let names = back.symbols.unwrap().names;
        assert_eq!(names.get(&0x1000), None);
        assert_eq!(names.get(&0x2000), Some(&vec!["main".to_string()]));
    }
}
