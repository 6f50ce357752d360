//! Folded stacks (`--collapsed`) and flame graphs (inferno), from resolved profiles.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

use jeprof_dumpfmt::charge;

use super::frames::{allocator_names_inlined, shown_frames};
use super::model::ReportOptions;
use super::text::{perl_int, units};
use crate::error::Error;
use crate::input::ReadPolicy;
use crate::named_input::load_all;
use crate::symbolize::{ResolvedProfile, SymbolizeOptions};

/// Folded stacks as `jeprof --collapsed` prints them: `root;...;leaf <count>`, one line per distinct
/// stack of addresses after allocator frames are removed (so two call sites of one function give two
/// lines, as in jeprof), full function names, inlined ones suffixed `[inline]`, counts truncated. A
/// stack made only of allocator frames prints as an empty stack, as in jeprof. jeprof prints lines in
/// random order; these are sorted.
///
/// Frames are removed as the text report removes them: allocator frames, and (unless
/// `--keep_alloc_frames`) the allocator functions Rust inlines into an address's innermost names;
/// `--show_from` drops functions toward the root, and then lines that print the same are added
/// up. `--hide` moves no frame here: what flat is charged to shows in a flame graph as the
/// frames above a function, which the hidden ones still are.
pub fn collapsed(profiles: &[ResolvedProfile], options: &ReportOptions) -> Vec<(String, f64)> {
    let mut table: HashMap<Vec<u64>, (String, f64)> = HashMap::new();
    for (p, profile) in profiles.iter().enumerate() {
        for stack in &profile.stacks {
            let (value, _) = options.measure.pick(&stack.counts);
            let Some(frames) = shown_frames(&stack.frames, options) else {
                continue;
            };
            let frames = &frames[..];
            // Addresses only mean the same thing within one dump (or one symbol table).
            let mut key: Vec<u64> = Vec::with_capacity(frames.len() + 1);
            key.push(p as u64);
            key.extend(frames.iter().map(|f| f.key));
            let entry = table.entry(key).or_insert_with(|| {
                let mut names: Vec<String> = Vec::with_capacity(frames.len() + 4);
                // The clean names of the line's functions, innermost first, for `--show_from`.
                let mut clean: Vec<&str> = Vec::with_capacity(frames.len() + 4);
                for f in frames {
                    let last = f.full_names.len().saturating_sub(1);
                    let first = allocator_names_inlined(f, options.skip);
                    for (j, n) in f.full_names.iter().enumerate().skip(first) {
                        names.push(charge::folded_name(n, j < last));
                        clean.push(f.names.get(j).map_or("", String::as_str));
                    }
                }
                let attribution = &options.attribution;
                let cut =
                    attribution.cut(names.len(), |_| false, |i| attribution.shows_from(clean[i]));
                names.truncate(cut.shown);
                names.reverse();
                (names.join(";"), 0.0)
            });
            entry.1 += value;
        }
    }
    let mut lines: Vec<(String, f64)> = if options.attribution.show_from.is_some() {
        // Stacks that differed only toward the root now print the same.
        let mut merged: HashMap<String, f64> = HashMap::new();
        for (line, value) in table.into_values() {
            *merged.entry(line).or_insert(0.0) += value;
        }
        merged.into_iter().collect()
    } else {
        table.into_values().collect()
    };
    lines.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    lines
}

/// [`collapsed`] of dump files. Folded stacks need every stack's frames with their full names, so
/// each dump is read and resolved whole ([`load_all`]: in memory 10 to 14 times its size),
/// where the text report ([`build_files`](super::build_files)) folds dumps as they are read.
/// Errors name the file (and line) of the first failing dump in `paths` order.
pub fn collapsed_files(
    paths: &[PathBuf],
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Vec<(String, f64)>, Error> {
    let profiles = load_all(paths, symbolize, policy)?;
    Ok(collapsed(&profiles, options))
}

/// The title of a flame graph of `paths` added up: the measure, and the dump or how many.
pub fn flamegraph_title(options: &ReportOptions, paths: &[PathBuf]) -> String {
    match paths {
        [one] => format!("{}: {}", options.measure.name(), one.display()),
        many => format!("{}: {} dumps added up", options.measure.name(), many.len()),
    }
}

/// Formats [`collapsed`] output.
pub fn format_collapsed(lines: &[(String, f64)]) -> String {
    let mut out = String::new();
    for (stack, value) in lines {
        let _ = writeln!(out, "{stack} {}", perl_int(*value));
    }
    out
}

/// Writes a flame graph SVG of the folded stacks with inferno.
pub fn flamegraph(
    lines: &[(String, f64)],
    options: &ReportOptions,
    title: &str,
    out: impl io::Write,
) -> Result<(), Error> {
    let folded = jeprof_page::flame::inferno_lines(lines);
    if folded.is_empty() {
        return Err(Error::NothingToDraw {
            unit: units(options.measure, true),
        });
    }
    let mut fg = inferno::flamegraph::Options::default();
    fg.title = title.to_string();
    fg.count_name = if options.measure.is_objects() {
        "objects"
    } else {
        "bytes"
    }
    .to_string();
    fg.colors =
        inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Rust);
    inferno::flamegraph::from_lines(&mut fg, folded.iter().map(String::as_str), out)
        .map_err(Error::Flamegraph)
}
