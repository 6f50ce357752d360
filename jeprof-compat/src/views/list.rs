//! jeprof's `--list REGEX`: the source of every function whose name matches, each line with the
//! flat and cumulative figures of the addresses compiled from it.
//!
//! As jeprof 5.3.1's `PrintListing` and `PrintSource`, with the program's symbol table standing
//! in for `nm -n` and its DWARF line table for `objdump -d -l` plus `addr2line -i`:
//! - figures are per address (`TranslateStack` at `--list` keeps addresses; each counted once per
//!   stack), after allocator frames, `--retain`/`--exclude`, `--focus` and `--ignore`;
//! - routines are the program's symbols matching REGEX (tested against `name<16-hex start>`, as
//!   jeprof tags them), each running to the next symbol, listed by name when an address in them has
//!   a figure;
//! - each range of the line table stands for the instructions in it, at the line of the outermost
//!   function there (an inlined call is shown on the line that calls it); the listed file is the
//!   first one met, the lines shown run from its first line met to its largest, extended while
//!   the following lines are indented at least as deep as the first (jeprof's "hacks" 1 to 4), and
//!   figures of ranges outside go to the next range inside (the rest to the last line);
//! - output: `ROUTINE ====================== name in file`, the totals, then the source from five
//!   lines before to five after, `---` around the function's lines, `.` for zero.
//!
//! Only the program given with `--binary` is listed (jeprof also lists shared libraries in the
//! memory map). Not reproduced: binutils' discriminators (a line split by them is one line here).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use regex::Regex;

use crate::error::Error;
use crate::report::{shown_frames, units, unparse, Measure, ReportOptions};
use crate::symbolize::ResolvedProfile;

/// Flat and cumulative figures per address of the program (its own virtual addresses).
#[derive(Default)]
struct Figures {
    flat: HashMap<u64, f64>,
    cum: HashMap<u64, f64>,
}

/// The program's address of a frame: through the memory map when it maps the program (PIE),
/// else the address itself (jeprof's catch-all entry for the program); `None` for another file.
fn program_address(
    key: u64,
    module: Option<&(std::sync::Arc<str>, u64)>,
    program: &Path,
    file: &object::File<'_>,
) -> Option<u64> {
    use object::{Object, ObjectSegment};
    let Some((path, offset)) = module else {
        return Some(key);
    };
    let same = Path::new(&**path).file_name() == program.file_name();
    if !same {
        return None;
    }
    file.segments().find_map(|s| {
        let (off, size) = s.file_range();
        (*offset >= off && *offset < off + size).then(|| offset - off + s.address())
    })
}

fn figures(
    profiles: &[ResolvedProfile],
    options: &ReportOptions,
    program: &Path,
    file: &object::File<'_>,
) -> Figures {
    let mut figures = Figures::default();
    let mut seen: Vec<u64> = Vec::new();
    for profile in profiles {
        for stack in &profile.stacks {
            let Some(frames) = shown_frames(&stack.frames, options) else {
                continue;
            };
            let (value, _) = options.measure.pick(&stack.counts);
            // `TranslateStack` drops kernel addresses, `ReduceProfile` repeats.
            seen.clear();
            for f in frames.iter().filter(|f| f.key <= 0x7fff_ffff_ffff_ffff) {
                if !seen.contains(&f.key) {
                    seen.push(f.key);
                    let Some(address) = program_address(f.key, f.module.as_ref(), program, file)
                    else {
                        continue;
                    };
                    if seen.len() == 1 {
                        *figures.flat.entry(address).or_default() += value;
                    }
                    *figures.cum.entry(address).or_default() += value;
                }
            }
        }
    }
    figures
}

/// `nm -n`'s routines of the program whose tagged name matches `regex`: name (tagged), start, end.
fn routines(file: &object::File<'_>, regex: &Regex) -> Vec<(String, u64, u64)> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let mut symbols: Vec<(u64, bool, String)> = file
        .symbols()
        .filter(|s| {
            s.is_definition() && !matches!(s.kind(), SymbolKind::File | SymbolKind::Section)
        })
        .filter_map(|s| {
            let name = s.name().ok()?;
            (!name.is_empty()).then(|| {
                let text = s.kind() == SymbolKind::Text;
                (s.address(), text, crate::names::demangle(name))
            })
        })
        .collect();
    symbols.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    // One symbol per address, the code one where there are several (jeprof keeps nm's `T`).
    symbols.dedup_by_key(|s| s.0);
    let mut found = Vec::new();
    for (i, (start, _, name)) in symbols.iter().enumerate() {
        let tagged = format!("{name}<{start:016x}>");
        if !regex.is_match(&tagged) {
            continue;
        }
        let end = symbols.get(i + 1).map_or(*start, |n| n.0);
        found.push((tagged, *start, end));
    }
    found
}

/// jeprof's `ShortFunctionName`.
fn short_function_name(name: &str) -> String {
    static ARGS: std::sync::OnceLock<[Regex; 3]> = std::sync::OnceLock::new();
    let [args, templates, leading] = ARGS.get_or_init(|| {
        [
            Regex::new(r"\([^()]*\)(\s*const)?").expect("static regex"),
            Regex::new(r"<[^<>]*>").expect("static regex"),
            Regex::new(r"^.*\s+(\w+::)").expect("static regex"),
        ]
    });
    let mut name = name.to_string();
    while args.is_match(&name) {
        name = args.replace_all(&name, "").into_owned();
    }
    while templates.is_match(&name) {
        name = templates.replace_all(&name, "").into_owned();
    }
    leading.replace(&name, "$1").into_owned()
}

/// jeprof's `CleanFileName`.
fn clean_file_name(file: &str) -> &str {
    let file = file.strip_prefix("/proc/self/cwd/").unwrap_or(file);
    file.strip_prefix("./").unwrap_or(file)
}

/// One range of the line table: start, end, and the outermost function's file and line there.
struct Instruction {
    start: u64,
    end: u64,
    file: String,
    line: i64,
}

fn instructions(loader: &addr2line::Loader, start: u64, end: u64) -> Vec<Instruction> {
    let mut found = Vec::new();
    let Ok(ranges) = loader.find_location_range(start, end) else {
        return found;
    };
    for (address, length, location) in ranges {
        // The line of the function being listed: the outermost frame's, as jeprof's
        // `GetTopLevelLineNumbers` takes from `addr2line -i`.
        let mut outer = location.file.map(|f| (f.to_string(), location.line));
        if let Ok(mut frames) = loader.find_frames(address) {
            while let Ok(Some(frame)) = frames.next() {
                if let Some(l) = frame.location {
                    if let (Some(file), Some(line)) = (l.file, l.line) {
                        outer = Some((file.to_string(), Some(line)));
                    }
                }
            }
        }
        let (file, line) = match outer {
            Some((file, Some(line))) => (file, i64::from(line)),
            Some((file, None)) => (file, -1),
            None => (String::new(), -1),
        };
        found.push(Instruction {
            start: address,
            end: address + length,
            file,
            line,
        });
    }
    found.sort_by_key(|i| i.start);
    found
}

/// jeprof's `Indentation`: the width of the leading white space of a line that has text, or -1.
fn indentation(line: &str) -> i64 {
    match line.find(|c: char| !c.is_whitespace()) {
        Some(i) => line[..i].chars().count() as i64,
        None => -1,
    }
}

/// Writes the listing of one routine as jeprof's `PrintSource`; false when its source is not
/// found (jeprof then says so on stderr and lists nothing).
fn print_source(
    routine: &str,
    code: &[Instruction],
    figures: &Figures,
    measure: Measure,
    show_bytes: bool,
    out: &mut String,
    warn: &mut dyn FnMut(String),
) -> bool {
    let Some(filename) = code.iter().find(|i| i.line >= 0).map(|i| i.file.clone()) else {
        warn(format!("no filename found in {routine}"));
        return false;
    };
    let in_file = || code.iter().filter(|i| i.file == filename);
    let oldlastline = in_file().map(|i| i.line).fold(0, i64::max);
    let firstline = in_file().next().map_or(1, |i| i.line);
    let source = match std::fs::read(&filename) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).replace('\r', ""),
        Err(e) => {
            warn(format!("{filename}: {e}"));
            return false;
        }
    };
    // Perl's `<FILE>` lines, each with its newline (the last may lack one).
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    let span = Span {
        first: firstline,
        last: block_end(&lines, firstline, oldlastline),
        old_last: oldlastline,
    };
    let by_line = line_figures(code, figures, &filename, &span);
    let u = |x: f64| unparse(x, measure, show_bytes);
    let _ = writeln!(
        out,
        "ROUTINE ====================== {} in {}",
        short_function_name(routine),
        clean_file_name(&filename)
    );
    let _ = writeln!(
        out,
        "{:>6} {:>6} Total {} (flat / cumulative)",
        u(by_line.total.0),
        u(by_line.total.1),
        units(measure, show_bytes)
    );
    write_lines(out, &lines, &span, &by_line, &u);
    true
}

/// The source lines a listing covers: from the routine's first line to `last` (its last line
/// extended to the end of its indented block), printed with five lines of context after
/// `old_last`, the last line the line table names.
struct Span {
    first: i64,
    last: i64,
    old_last: i64,
}

/// jeprof's extension of a routine's last line to the end of its block: past `lastline`, lines
/// indented at least as far as the routine's first line belong to it.
fn block_end(lines: &[&str], firstline: i64, mut lastline: i64) -> i64 {
    let mut first_indentation = -1;
    for (i, text) in lines.iter().enumerate() {
        let l = i as i64 + 1;
        let indent = indentation(text);
        if l >= firstline && first_indentation < 0 && indent >= 0 {
            first_indentation = indent;
            if first_indentation == 0 {
                break;
            }
        }
        if l >= lastline && indent >= 0 {
            if indent >= first_indentation {
                lastline = l + 1;
            } else {
                break;
            }
        }
    }
    lastline
}

/// Flat and cumulative figures per source line, and their totals.
struct LineFigures {
    flat: BTreeMap<i64, f64>,
    cum: BTreeMap<i64, f64>,
    /// (flat, cumulative) over every instruction of the routine.
    total: (f64, f64),
}

/// jeprof's charging of instructions to lines: each instruction's figures run on until an
/// instruction of the listed file inside the span takes them; what is left goes to the last line.
fn line_figures(
    code: &[Instruction],
    figures: &Figures,
    filename: &str,
    span: &Span,
) -> LineFigures {
    let mut by_line = LineFigures {
        flat: BTreeMap::new(),
        cum: BTreeMap::new(),
        total: (0.0, 0.0),
    };
    let sum_in = |table: &HashMap<u64, f64>, i: &Instruction| -> f64 {
        table
            .iter()
            .filter(|(a, _)| **a >= i.start && **a < i.end)
            .fold(0.0, |sum, (_, v)| sum + v)
    };
    let (mut running1, mut running2) = (0.0, 0.0);
    for i in code {
        let c1 = sum_in(&figures.flat, i);
        let c2 = sum_in(&figures.cum, i);
        running1 += c1;
        running2 += c2;
        by_line.total.0 += c1;
        by_line.total.1 += c2;
        if i.file == filename && i.line >= span.first && i.line <= span.last {
            *by_line.flat.entry(i.line).or_default() += running1;
            *by_line.cum.entry(i.line).or_default() += running2;
            running1 = 0.0;
            running2 = 0.0;
        }
    }
    *by_line.flat.entry(span.last).or_default() += running1;
    *by_line.cum.entry(span.last).or_default() += running2;
    by_line
}

/// The listed lines with their figures (`.` for none), the routine between `---` lines.
fn write_lines(
    out: &mut String,
    lines: &[&str],
    span: &Span,
    by_line: &LineFigures,
    u: &dyn Fn(f64) -> String,
) {
    let alt = |x: f64| if x == 0.0 { ".".to_string() } else { u(x) };
    for (i, text) in lines.iter().enumerate() {
        let l = i as i64 + 1;
        if l >= span.first - 5 && (l <= span.old_last + 5 || l <= span.last) {
            // Perl's `chop`: the last character, newline or not.
            let mut chars = text.chars();
            chars.next_back();
            if l == span.first {
                out.push_str("---\n");
            }
            let n1 = by_line.flat.get(&l).copied().unwrap_or(0.0);
            let n2 = by_line.cum.get(&l).copied().unwrap_or(0.0);
            let _ = writeln!(
                out,
                "{:>6} {:>6} {l:>4}: {}",
                alt(n1),
                alt(n2),
                chars.as_str()
            );
            if l == span.last {
                out.push_str("---\n");
            }
        }
    }
}

/// The listing of every routine of `program` matching `regex` that has a figure, as
/// `jeprof --list` prints it; `warn` hears about routines whose source cannot be read.
pub fn listing(
    profiles: &[ResolvedProfile],
    options: &ReportOptions,
    program: &Path,
    regex: &Regex,
    warn: &mut dyn FnMut(String),
) -> Result<String, Error> {
    let mut out = String::new();
    let data = std::fs::read(program).map_err(|e| Error::Program {
        path: program.to_path_buf(),
        reason: e.to_string(),
    })?;
    let file = object::File::parse(&*data).map_err(|e| Error::Program {
        path: program.to_path_buf(),
        reason: format!("not an object file: {e}"),
    })?;
    let loader = addr2line::Loader::new(program).map_err(|e| Error::Program {
        path: program.to_path_buf(),
        reason: e.to_string(),
    })?;
    let figures = figures(profiles, options, program, &file);
    let mut found = routines(&file, regex);
    found.sort_by(|a, b| {
        short_function_name(&a.0)
            .cmp(&short_function_name(&b.0))
            .then(a.1.cmp(&b.1))
    });
    for (routine, start, end) in found {
        if !figures.cum.keys().any(|a| *a >= start && *a < end) {
            continue;
        }
        let code = instructions(&loader, start, end);
        print_source(
            &routine,
            &code,
            &figures,
            options.measure,
            options.show_bytes,
            &mut out,
            warn,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_and_indentation_are_jeprofs() {
        assert_eq!(short_function_name("mid_a<0000000000401130>"), "mid_a");
        assert_eq!(
            short_function_name("std::vector<int>::push_back(int const&)<0000000000401130>"),
            "std::vector::push_back"
        );
        assert_eq!(indentation("  x\n"), 2);
        assert_eq!(indentation("   \n"), -1);
        assert_eq!(clean_file_name("./src/a.c"), "src/a.c");
    }
}
