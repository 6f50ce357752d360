//! jeprof's `--callgrind`: the call graph in Callgrind's format, for `callgrind_annotate` and
//! KCachegrind.
//!
//! As jeprof 5.3.1's `ExtractCalls` and `PrintCallgrind`:
//! - each frame is a location `file:line:function`: the containing (outermost) function at the
//!   address and its line there; `??:0` for an unknown line (always, in jeprof, for a dump with a
//!   symbol section: we use its `# line` entries where it has them); an address nothing names is
//!   `??:0:0x<16 hex digits>`, or `??:0:unknown` when no program was looked in;
//! - after allocator frames, `--retain`/`--exclude`, `--focus` and `--ignore` (recursion is kept),
//!   a stack's figure goes to its leaf's location (cost on the leaf's line) and to every call
//!   `caller -> callee` along it (a `calls=` line); a stack of allocator frames only goes to
//!   `??:0:unknown`;
//! - entries are sorted by the caller's file, then line; figures are truncated to integers; file
//!   and function names are written once and then referred to as `(n)` (names of at most three
//!   characters always in full).
//!
//! jeprof sorts entries of the same file and line in Perl hash order (random), and its parse of
//! its own keys cuts a function name at its first space; here ties are ordered by the rest of the
//! entry and names are whole.

use std::collections::HashMap;
use std::io;

use crate::report::{perl_int, shown_frames, ReportOptions};
use crate::symbolize::{Frame, ResolvedProfile};

/// A location `file:line:function`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Location {
    file: String,
    line: u32,
    function: String,
}

/// jeprof's `ExtractSymbolLocation` of a frame.
fn location(frame: &Frame) -> Location {
    if !frame.symbolized {
        // An address nothing names: jeprof has an entry `0x…` for it when it looked in a program
        // (or read a symbol section), none otherwise.
        let function = match frame.names.last() {
            Some(name) if name.starts_with("0x") => name.clone(),
            _ => "unknown".to_string(),
        };
        return Location {
            file: "??".into(),
            line: 0,
            function,
        };
    }
    let last = frame.names.len().saturating_sub(1);
    let (file, line) = match frame.line(last) {
        Some(l) => (l.file.clone(), l.line),
        None => ("??".to_string(), 0),
    };
    Location {
        file,
        line,
        function: frame.function().to_string(),
    }
}

/// The call graph of `profiles` added up: per leaf location its own cost, per call its count.
type Calls = HashMap<(Location, Option<Location>), f64>;

fn extract_calls(profiles: &[ResolvedProfile], options: &ReportOptions) -> Calls {
    let mut calls: Calls = HashMap::new();
    let mut locations: HashMap<*const Frame, Location> = HashMap::new();
    for profile in profiles {
        for stack in &profile.stacks {
            let Some(frames) = shown_frames(&stack.frames, options) else {
                continue;
            };
            let (value, _) = options.measure.pick(&stack.counts);
            let mut at = |f: &std::sync::Arc<Frame>| {
                locations
                    .entry(std::sync::Arc::as_ptr(f))
                    .or_insert_with(|| location(f))
                    .clone()
            };
            let mut destination = match frames.first() {
                Some(leaf) => at(leaf),
                // A stack of allocator frames only: jeprof's location of no address.
                None => Location {
                    file: "??".into(),
                    line: 0,
                    function: "unknown".into(),
                },
            };
            *calls.entry((destination.clone(), None)).or_default() += value;
            for caller in frames.iter().skip(1) {
                let source = at(caller);
                *calls
                    .entry((source.clone(), Some(destination)))
                    .or_default() += value;
                destination = source;
            }
        }
    }
    calls
}

/// jeprof's `CompressedCGName`: `key=value` the first time (with its new number), `key=(n)` after.
fn compressed(key: &str, value: &str, map: &mut HashMap<String, usize>) -> String {
    if value.len() <= 3 {
        return format!("{key}={value}\n");
    }
    if let Some(n) = map.get(value) {
        return format!("{key}=({n})\n");
    }
    let n = map.len() + 1;
    map.insert(value.to_string(), n);
    format!("{key}=({n}) {value}\n")
}

/// Writes the call graph of `profiles` added up as `jeprof --callgrind` does.
pub fn write(
    profiles: &[ResolvedProfile],
    options: &ReportOptions,
    mut out: impl io::Write,
) -> io::Result<()> {
    let calls = extract_calls(profiles, options);
    let mut entries: Vec<_> = calls.into_iter().collect();
    entries.sort_by(|((a, ac), _), ((b, bc), _)| {
        (&a.file, a.line, &a.function, ac).cmp(&(&b.file, b.line, &b.function, bc))
    });
    let (mut files, mut functions) = (HashMap::new(), HashMap::new());
    out.write_all(b"events: Hits\n\n")?;
    for ((caller, callee), value) in entries {
        let count = perl_int(value);
        out.write_all(compressed("fl", &caller.file, &mut files).as_bytes())?;
        out.write_all(compressed("fn", &caller.function, &mut functions).as_bytes())?;
        if let Some(callee) = callee {
            out.write_all(compressed("cfl", &callee.file, &mut files).as_bytes())?;
            out.write_all(compressed("cfn", &callee.function, &mut functions).as_bytes())?;
            writeln!(out, "calls={count} {}", callee.line)?;
        }
        writeln!(out, "{} {count}\n", caller.line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_on_first_use_and_short_ones_always_written() {
        let mut map = HashMap::new();
        assert_eq!(compressed("fl", "??", &mut map), "fl=??\n");
        assert_eq!(compressed("fn", "main", &mut map), "fn=(1) main\n");
        assert_eq!(compressed("cfn", "leaf", &mut map), "cfn=(2) leaf\n");
        assert_eq!(compressed("fn", "main", &mut map), "fn=(1)\n");
    }
}
