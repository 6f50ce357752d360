//! jeprof's `--dot` call graph (Graphviz), and `--svg` (that graph through Graphviz's `dot`).
//!
//! As jeprof 5.3.1's `PrintDot`:
//! - nodes are the report's functions, by decreasing absolute cumulative figure (then name), at
//!   most `--nodecount` (80), leaving out the tail whose cumulative figure is at most
//!   `--nodefraction` (0.005) of the shown total; each is labelled with its name (split at
//!   spaces and `::`), its flat figure and share, and its cumulative one where it differs, in a
//!   font growing with the square root of its flat share;
//! - edges join consecutive functions of each shown stack (after allocator frames and the
//!   filters; recursion and inlined functions included), adding up the stacks' figures; they are
//!   taken by decreasing figure: the first edge into a node always, the others while above
//!   `--edgefraction` (0.001) of the total and within 8 edges in and out per node; an edge into an
//!   inlined function is dashed;
//! - the title and legend name the program (the symbol section's `binary=`, else `--binary` as
//!   given) and the totals.
//!
//! jeprof orders edges of equal figures in Perl hash order (random); here by their nodes' names.
//! `--svg` is `dot -Tsvg` of the same graph (edges at least 1 wide, as jeprof's); jeprof's
//! rewriting of the SVG for its web viewer (pan and zoom script) is not reproduced.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::report::{self, frame_functions, percent, shown_frames, units, unparse, ReportOptions};
use crate::symbolize::ResolvedProfile;

/// The graph's limits (jeprof's defaults: 80 nodes, 0.005, 0.001, 8).
#[derive(Debug, Clone)]
pub struct DotOptions {
    /// `--nodecount`: at most this many nodes.
    pub nodecount: usize,
    /// `--nodefraction`: leave out nodes whose cumulative figure is at most this share of the
    /// shown total.
    pub nodefraction: f64,
    /// `--edgefraction`: leave out edges (but a node's first) of at most this share.
    pub edgefraction: f64,
    /// At most this many edges into and out of a node (but a node's first).
    pub maxdegree: usize,
    /// Edges at least 1 wide (jeprof's SVG output).
    pub svg: bool,
    /// The program named in the title and legend.
    pub program: String,
}

impl Default for DotOptions {
    fn default() -> DotOptions {
        DotOptions {
            nodecount: 80,
            nodefraction: 0.005,
            edgefraction: 0.001,
            maxdegree: 8,
            svg: false,
            program: String::new(),
        }
    }
}

/// Perl's `int()` of a double: truncation toward zero.
fn perl_trunc(x: f64) -> f64 {
    x.trunc()
}

/// The Graphviz text of the call graph of `profiles` added up, as `jeprof --dot` prints it, and
/// the line jeprof prints on stderr about what it drops; `None` when no node is left ("No nodes
/// to print", jeprof's failure).
pub fn graph(
    profiles: &[ResolvedProfile],
    options: &ReportOptions,
    dot: &DotOptions,
) -> Option<(String, Option<String>)> {
    let built = report::build(profiles, options);
    let (m, b) = (options.measure, options.show_bytes);
    let limits = Limits {
        local_total: built.shown_total,
        node: perl_trunc(dot.nodefraction * built.shown_total),
        edge: perl_trunc(dot.edgefraction * built.shown_total),
    };
    let rows = shown_nodes(&built.rows, dot.nodecount, limits.node)?;
    let dropping = (limits.node > 0.0 || limits.edge > 0.0).then(|| {
        format!(
            "Dropping nodes with <= {} {}; edges with <= {} abs({})",
            unparse(limits.node, m, b),
            units(m, b),
            unparse(limits.edge, m, b),
            units(m, b)
        )
    });
    let mut out = String::new();
    write_header(&mut out, built.total, &limits, options, dot);
    let node = write_nodes(&mut out, &rows, &limits, options);
    let edges = edge_figures(profiles, options, &node);
    write_edges(&mut out, edges, &node, &limits, options, dot);
    out.push_str("}\n");
    Some((out, dropping))
}

/// The figures the graph's cuts are measured against: the shown total, and jeprof's node and
/// edge limits (its fractions of that total, truncated as Perl's `int`).
struct Limits {
    local_total: f64,
    node: f64,
    edge: f64,
}

/// The functions drawn as nodes: by decreasing absolute cumulative figure (then name), at most
/// `nodecount`, without the tail at or below `nodelimit`; `None` when none is left.
fn shown_nodes(
    rows: &[report::FunctionFigures],
    nodecount: usize,
    nodelimit: f64,
) -> Option<Vec<&report::FunctionFigures>> {
    let mut rows: Vec<&report::FunctionFigures> = rows.iter().collect();
    rows.sort_by(|x, y| {
        y.cum
            .abs()
            .total_cmp(&x.cum.abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    let mut last = nodecount.min(rows.len()) as isize - 1;
    while last >= 0 && rows[last as usize].cum.abs() <= nodelimit {
        last -= 1;
    }
    if last < 0 {
        return None;
    }
    rows.truncate(last as usize + 1);
    Some(rows)
}

/// The graph's opening line, node defaults and legend.
fn write_header(
    out: &mut String,
    total: f64,
    limits: &Limits,
    options: &ReportOptions,
    dot: &DotOptions,
) {
    let (m, b) = (options.measure, options.show_bytes);
    let _ = writeln!(
        out,
        "digraph \"{}; {} {}\" {{",
        dot.program,
        unparse(total, m, b),
        units(m, b)
    );
    out.push_str("node [width=0.375,height=0.25];\n");
    let _ = writeln!(
        out,
        "Legend [shape=box,fontsize=24,shape=plaintext,label=\"{}\\l{}\\l{}\\l{}\\l{}\\l\"];",
        dot.program,
        format_args!("Total {}: {}", units(m, b), unparse(total, m, b)),
        format_args!("Focusing on: {}", unparse(limits.local_total, m, b)),
        format_args!(
            "Dropped nodes with <= {} abs({})",
            unparse(limits.node, m, b),
            units(m, b)
        ),
        format_args!(
            "Dropped edges with <= {} {}",
            unparse(limits.edge, m, b),
            units(m, b)
        ),
    );
}

/// One box per shown function (its name split at spaces and `::`, flat and cum figures, a font
/// growing with the square root of its flat share); returns each name's node number.
fn write_nodes<'r>(
    out: &mut String,
    rows: &[&'r report::FunctionFigures],
    limits: &Limits,
    options: &ReportOptions,
) -> HashMap<&'r str, usize> {
    let (m, b) = (options.measure, options.show_bytes);
    let local_total = limits.local_total;
    let mut node: HashMap<&str, usize> = HashMap::new();
    let space = regex::Regex::new(r"\s+").expect("static regex");
    for (i, row) in rows.iter().enumerate() {
        let (f, c) = (row.flat, row.cum);
        let fs = if local_total > 0.0 {
            8.0 + 50.0 * (f / local_total).abs().sqrt()
        } else {
            8.0
        };
        node.insert(&row.name, i + 1);
        let sym = space.replace_all(&row.name, "\\n").replace("::", "\\n");
        let extra = if f != c {
            format!("\\rof {} ({})", unparse(c, m, b), percent(c, local_total))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "N{} [label=\"{sym}\\n{} ({}){extra}\\r\",shape=box,fontsize={fs:.1}];",
            i + 1,
            unparse(f, m, b),
            percent(f, local_total),
        );
    }
    node
}

/// Edges between consecutive functions of each shown stack, as `TranslateStack` gives them,
/// between nodes only, with the stacks' figures added up; by decreasing figure, then by their
/// nodes' names (jeprof's order of equal figures is Perl's hash order).
fn edge_figures<'n>(
    profiles: &[ResolvedProfile],
    options: &ReportOptions,
    node: &HashMap<&'n str, usize>,
) -> Vec<((&'n str, &'n str), f64)> {
    let mut edges: HashMap<(&str, &str), f64> = HashMap::new();
    let mut translated: Vec<String> = Vec::new();
    for profile in profiles {
        for stack in &profile.stacks {
            let Some(frames) = shown_frames(&stack.frames, options) else {
                continue;
            };
            let (value, _) = options.measure.pick(&stack.counts);
            translated.clear();
            for f in frames.iter() {
                translated.extend(frame_functions(f, options));
            }
            for pair in translated.windows(2) {
                let (dst, src) = (pair[0].as_str(), pair[1].as_str());
                if let (Some((&src, _)), Some((&dst, _))) =
                    (node.get_key_value(src), node.get_key_value(dst))
                {
                    *edges.entry((src, dst)).or_default() += value;
                }
            }
        }
    }
    let mut edges: Vec<((&str, &str), f64)> = edges.into_iter().collect();
    edges.sort_by(|(ka, a), (kb, b)| b.total_cmp(a).then_with(|| ka.cmp(kb)));
    edges
}

/// The edges jeprof keeps: a node's first incoming edge always, the others while above the edge
/// limit and within `maxdegree` in and out; width and weight as jeprof computes them, dashed into
/// an inlined function.
fn write_edges(
    out: &mut String,
    edges: Vec<((&str, &str), f64)>,
    node: &HashMap<&str, usize>,
    limits: &Limits,
    options: &ReportOptions,
    dot: &DotOptions,
) {
    let (m, b) = (options.measure, options.show_bytes);
    let mut indegree: HashMap<&str, usize> = HashMap::new();
    let mut outdegree: HashMap<&str, usize> = HashMap::new();
    for ((src, dst), n) in edges {
        let ins = *indegree.get(dst).unwrap_or(&0);
        let outs = *outdegree.get(src).unwrap_or(&0);
        let keep =
            ins == 0 || !(n.abs() <= limits.edge || outs >= dot.maxdegree || ins >= dot.maxdegree);
        if !keep {
            continue;
        }
        *outdegree.entry(src).or_default() += 1;
        *indegree.entry(dst).or_default() += 1;
        let fraction = if limits.local_total != 0.0 {
            (3.0 * (n / limits.local_total)).abs().min(1.0)
        } else {
            0.0
        };
        let mut w = fraction * 2.0;
        if w < 1.0 && dot.svg {
            w = 1.0;
        }
        let weight = n.abs().powf(0.7).min(100_000.0).trunc();
        let dashed = if dst.contains("(inline)") {
            ",dashed"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "N{} -> N{} [label={}, weight={weight:.0}, style=\"setlinewidth({w:.6}){dashed}\"];",
            node[src],
            node[dst],
            unparse(n, m, b),
        );
    }
}

/// The program jeprof names in the graph: the last symbol section's `binary=`, else `binary`
/// as given on the command line.
pub fn program_name(dumps: &[jeprof_dumpfmt::Profile], binary: Option<&std::path::Path>) -> String {
    dumps
        .iter()
        .rev()
        .find_map(|d| d.symbols.as_ref()?.binary.clone())
        .or_else(|| binary.map(|b| b.display().to_string()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_jeprofs() {
        let d = DotOptions::default();
        assert_eq!((d.nodecount, d.maxdegree), (80, 8));
        assert_eq!((d.nodefraction, d.edgefraction), (0.005, 0.001));
    }
}
