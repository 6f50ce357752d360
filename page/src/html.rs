//! The page: one HTML document, its CSS and script inline, nothing fetched from anywhere.

use std::fmt::Write as _;

use jeprof_dumpfmt::math::confidence_interval_95;

use crate::escape::{self, push};
use crate::model::{Growth, Page, Site, Source};
use crate::{chart, flame, units};

/// At most this many sites are listed (the rest are counted), so a profile of a million
/// functions still makes a page of a few hundred kilobytes.
pub const MAX_SITES: usize = 200;

/// At most this many folded stacks are drawn, the largest: the flame graph of 10,000 stacks is
/// already a few megabytes of SVG, and the smallest are thinner than a pixel.
pub const MAX_FOLDED: usize = 5_000;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse}th,td{padding:2px 8px;text-align:right;white-space:nowrap}\
td.name,th.name{text-align:left;white-space:normal;word-break:break-all;max-width:60em}\
th{cursor:pointer;background:#f0f0f0;position:sticky;top:0}tr:nth-child(even){background:#fafafa}\
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere}\
code{background:#f6f6f6;overflow-wrap:anywhere}.note{color:#666}.flame{overflow-x:auto}\
td[title],b[title]{text-decoration:underline dotted #aaa}\
tr.grew td{background:#fbd9d3}tr.shrank td{background:#d6e4fa}nav.moments a{margin-right:.8em}";

/// Sorts the sites table by the clicked column: numbers by their `data-v`, names as text;
/// a second click reverses. Fills the listener's address into the command lines.
const SCRIPT: &str = "(function(){\
var t=document.getElementById('sites');if(t){var hs=t.tHead.rows[0].cells;\
for(var i=0;i<hs.length;i++){(function(c){hs[c].addEventListener('click',function(){\
var b=t.tBodies[0],rs=Array.prototype.slice.call(b.rows),d=hs[c].getAttribute('data-dir')==='d'?'a':'d';\
hs[c].setAttribute('data-dir',d);rs.sort(function(x,y){var p=x.cells[c],q=y.cells[c],r;\
if(p.hasAttribute('data-v')){r=parseFloat(p.getAttribute('data-v'))-parseFloat(q.getAttribute('data-v'));}\
else{r=p.textContent<q.textContent?-1:p.textContent>q.textContent?1:0;}return d==='d'?-r:r;});\
rs.forEach(function(r){b.appendChild(r);});});})(i);}}\
if(location.protocol==='http:'||location.protocol==='https:'){\
var hs2=document.querySelectorAll('.host');for(var j=0;j<hs2.length;j++){hs2[j].textContent=location.host;}}\
})();";

/// A figure as the report prints it with `--show_bytes`: truncated to an integer.
pub fn whole(x: f64) -> String {
    if !x.is_finite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    format!("{:.0}", x.trunc())
}

/// A figure's 95% interval as the report's `--interval` columns print it: `[low, high]`.
pub fn interval(x: f64, variance: f64) -> String {
    let (low, high) = confidence_interval_95(x, variance);
    format!("[{}, {}]", whole(low), whole(high))
}

/// What a figure counts: the page writes each in its units ([`units`]), the exact figure as the
/// report prints it in the cell's `title`.
#[derive(Clone, Copy)]
enum Kind {
    Bytes,
    Objects,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Bytes => "bytes",
            Kind::Objects => "objects",
        }
    }

    fn human(self, x: f64) -> String {
        match self {
            Kind::Bytes => units::bytes(x),
            Kind::Objects => units::count(x),
        }
    }

    fn human_interval(self, x: f64, variance: f64) -> String {
        let (low, high) = confidence_interval_95(x, variance);
        match self {
            Kind::Bytes => units::bytes_interval(low, high),
            Kind::Objects => units::count_interval(low, high),
        }
    }
}

/// A figure's table cells: the figure and its interval, each readable (`27.7 MiB`,
/// `22.9–32.5 MiB`) with the exact figures in its `title` (`28995669 bytes`), sorted by `data-v`.
fn figure_cells(out: &mut String, x: f64, variance: f64, kind: Kind) {
    let (low, _) = confidence_interval_95(x, variance);
    let word = kind.word();
    let _ = write!(
        out,
        "<td data-v=\"{}\" title=\"{} {word}\">{}</td><td data-v=\"{}\" title=\"{} {word}\">{}</td>",
        escape::number(x),
        whole(x),
        kind.human(x),
        escape::number(low),
        interval(x, variance),
        kind.human_interval(x, variance),
    );
}

/// The page of `page`, a complete HTML document.
pub fn render(page: &Page) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width\"><title>");
    push(&mut out, &page.title);
    let _ = write!(out, "</title><style>{STYLE}</style></head><body>");
    out.push_str("<h1>");
    push(&mut out, &page.title);
    out.push_str("</h1>");
    let (total, objects) = (&page.total, Kind::Objects);
    let _ = write!(
        out,
        "<p>In use: <b id=\"total-bytes\" title=\"{} bytes {}\">{}</b> ({}) in \
         <b title=\"{} objects {}\">{} objects</b> ({}) (95% intervals), unbiased estimates from \
         sampled allocations.</p>",
        whole(total.bytes),
        interval(total.bytes, total.bytes_variance),
        Kind::Bytes.human(total.bytes),
        Kind::Bytes.human_interval(total.bytes, total.bytes_variance),
        whole(total.objects),
        interval(total.objects, total.objects_variance),
        objects.human(total.objects),
        objects.human_interval(total.objects, total.objects_variance),
    );
    moments_menu(&mut out, page);
    match &page.growth {
        // One inferno drawing per page (its script takes the first SVG): what grew replaces
        // the plain flame graph, its frames as wide as now.
        Some(growth) => growth_section(&mut out, growth),
        None => flame_section(&mut out, page),
    }
    sites_section(&mut out, &page.sites);
    allocator_section(&mut out, page);
    history_section(&mut out, page);
    scopes_section(&mut out, page);
    endpoints_section(&mut out, page);
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

/// The moments the page can be compared with, as links.
fn moments_menu(out: &mut String, page: &Page) {
    if page.moments.is_empty() {
        return;
    }
    out.push_str("<nav class=\"moments\" id=\"moments\">What grew since: ");
    for (label, link) in &page.moments {
        out.push_str("<a href=\"");
        push(out, link);
        out.push_str("\">");
        push(out, label);
        out.push_str("</a>");
    }
    out.push_str("</nav>");
}

/// What grew: the differential flame graph and the sites' changes, coloured only where `diff`'s
/// interval test finds the change significant.
fn growth_section(out: &mut String, growth: &Growth) {
    out.push_str("<h2>What grew since ");
    push(out, &growth.base);
    out.push_str(
        "</h2><p class=\"note\">Frames as wide as their live bytes now, red where they \
        grew and blue where they shrank since then. In the table, a change is coloured only when \
        its 95% interval excludes zero (<code>jeprof-compat diff</code>'s test); the others are \
        within sampling noise.",
    );
    if !growth.note.is_empty() {
        out.push(' ');
        push(out, &growth.note);
    }
    out.push_str("</p>");
    let mut folded: Vec<&(String, f64, f64)> = growth.folded.iter().collect();
    if folded.len() > MAX_FOLDED {
        folded.sort_by(|a, b| b.2.max(b.1).total_cmp(&a.2.max(a.1)));
        folded.truncate(MAX_FOLDED);
    }
    let folded: Vec<(String, f64, f64)> = folded.into_iter().cloned().collect();
    push_flame(
        out,
        flame::differential_svg(&folded, "inuse_space: what grew"),
    );
    out.push_str(
        "<table id=\"growth\"><thead><tr><th class=\"name\">function</th><th>then</th>\
         <th>now</th><th>change</th><th>95% interval</th></tr></thead><tbody>",
    );
    for c in growth.changes.iter().take(MAX_SITES) {
        let class = match (c.significant(), c.delta > 0.0) {
            (true, true) => " class=\"grew\"",
            (true, false) => " class=\"shrank\"",
            (false, _) => "",
        };
        let _ = write!(out, "<tr{class}><td class=\"name\">");
        push(out, &c.name);
        let cell = |x: f64| {
            format!(
                "<td data-v=\"{}\" title=\"{} bytes\">{}</td>",
                escape::number(x),
                whole(x),
                units::bytes(x)
            )
        };
        let (low, high) = (c.delta - c.half_width, c.delta + c.half_width);
        let _ = write!(
            out,
            "</td>{}{}{}<td data-v=\"{}\" title=\"[{}, {}] bytes\">{}</td></tr>",
            cell(c.base),
            cell(c.new),
            cell(c.delta),
            escape::number(low),
            whole(low),
            whole(high),
            units::bytes_interval(low, high),
        );
    }
    out.push_str("</tbody></table>");
}

/// A flame graph drawn by [`flame`], or the note saying why there is none.
fn push_flame(out: &mut String, drawn: Result<String, String>) {
    match drawn {
        Ok(svg) => {
            out.push_str("<div class=\"flame\">");
            out.push_str(&svg);
            out.push_str("</div>");
        }
        Err(why) => {
            out.push_str("<p class=\"note\">");
            push(out, &why);
            out.push_str("</p>");
        }
    }
}

fn flame_section(out: &mut String, page: &Page) {
    out.push_str("<h2>In-use flame graph</h2>");
    out.push_str(
        "<p class=\"note\">Live bytes by stack, the root at the bottom, allocator frames \
         removed as the report removes them. Click a frame to zoom, Ctrl-F to search.</p>",
    );
    let mut folded: Vec<&(String, f64)> = page.folded.iter().collect();
    let left_out = folded.len().saturating_sub(MAX_FOLDED);
    if left_out > 0 {
        folded.sort_by(|a, b| b.1.total_cmp(&a.1));
        folded.truncate(MAX_FOLDED);
    }
    let folded: Vec<(String, f64)> = folded.into_iter().cloned().collect();
    push_flame(out, flame::svg(&folded, "inuse_space"));
    if left_out > 0 {
        let _ = write!(
            out,
            "<p class=\"note\">The {MAX_FOLDED} largest stacks are drawn; {left_out} smaller \
             ones are left out.</p>"
        );
    }
}

/// The reading of the sites' resident column, under the table.
const RESIDENT_READING: &str = "<p class=\"note\" id=\"resident-reading\">resident: bytes of \
     the site's live objects on present pages, from /proc/self/pagemap at the dump; small objects \
     share pages, so an untouched small object on a page a neighbour touched counts as resident \
     (jeprof-shim's README, \"Where the resident memory is\"; <code>jeprof-compat report \
     --rss</code> adds the swapped bytes, the stranded slab space and RSS reconciled).</p>";

fn sites_section(out: &mut String, sites: &[Site]) {
    out.push_str("<h2>Top sites by user frame</h2>");
    out.push_str(
        "<p class=\"note\">Flat: the live memory of the stacks whose first function of the \
         program's own (past the standard library and the allocator) this is; cum: of the \
         stacks it appears in. The figures <code>jeprof-compat report --show_bytes --interval</code> \
         prints, its rows with a flat figure. Click a column to sort.</p>",
    );
    let shown_total: f64 = sites.iter().map(|s| s.bytes).sum();
    // A site is charged flat; functions with cum only are the report's lower rows.
    let sites: Vec<&Site> = sites
        .iter()
        .filter(|s| s.bytes != 0.0 || s.objects != 0.0)
        .collect();
    let resident = sites.iter().any(|s| s.resident.is_some());
    out.push_str(
        "<table id=\"sites\"><thead><tr><th class=\"name\">function</th><th>flat bytes</th>\
         <th>95% interval</th><th>flat %</th><th>flat objects</th><th>95% interval</th>\
         <th>cum bytes</th><th>95% interval</th>",
    );
    if resident {
        out.push_str("<th>resident</th><th>95% interval</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for s in sites.iter().take(MAX_SITES) {
        let s = *s;
        let share = if shown_total != 0.0 {
            100.0 * s.bytes / shown_total
        } else {
            0.0
        };
        out.push_str("<tr><td class=\"name\">");
        push(out, &s.name);
        out.push_str("</td>");
        figure_cells(out, s.bytes, s.bytes_variance, Kind::Bytes);
        let _ = write!(
            out,
            "<td data-v=\"{}\">{share:.1}%</td>",
            escape::number(share)
        );
        figure_cells(out, s.objects, s.objects_variance, Kind::Objects);
        figure_cells(out, s.cum_bytes, s.cum_bytes_variance, Kind::Bytes);
        if resident {
            let r = s.resident.unwrap_or_default();
            figure_cells(out, r.bytes, r.variance, Kind::Bytes);
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    if resident {
        out.push_str(RESIDENT_READING);
    }
    if sites.len() > MAX_SITES {
        let _ = write!(
            out,
            "<p class=\"note\">{} more sites with smaller flat figures are not listed.</p>",
            sites.len() - MAX_SITES
        );
    }
}

fn allocator_section(out: &mut String, page: &Page) {
    out.push_str("<h2>The allocator and the gap to RSS</h2>");
    match &page.allocator {
        Ok(text) => {
            out.push_str("<pre id=\"allocator\">");
            push(out, text);
            out.push_str("</pre>");
        }
        Err(why) => {
            out.push_str("<p class=\"note\">");
            push(out, why);
            out.push_str("</p>");
        }
    }
}

fn history_section(out: &mut String, page: &Page) {
    out.push_str("<h2>Live bytes over time</h2>");
    match &page.history {
        Ok(history) => {
            out.push_str("<p class=\"note\">");
            push(out, &history.note);
            out.push_str("</p>");
            match chart::svg(history) {
                Some(svg) => out.push_str(&svg),
                None => out.push_str("<p class=\"note\">Fewer than two moments: no chart.</p>"),
            }
            let suspects: Vec<&str> = history
                .series
                .iter()
                .filter(|s| s.suspect)
                .map(|s| s.name.as_str())
                .collect();
            if !suspects.is_empty() {
                out.push_str("<p>Leak suspects (still growing): </p><ul id=\"suspects\">");
                for name in suspects {
                    out.push_str("<li>");
                    push(out, name);
                    out.push_str("</li>");
                }
                out.push_str("</ul>");
            }
        }
        Err(why) => {
            out.push_str("<p class=\"note\">");
            push(out, why);
            out.push_str("</p>");
        }
    }
}

fn scopes_section(out: &mut String, page: &Page) {
    if page.scopes.is_empty() {
        return;
    }
    out.push_str(
        "<h2>Scopes</h2><table id=\"scopes\"><thead><tr><th class=\"name\">scope</th>\
         <th>live bytes</th><th>95% interval</th><th>live objects</th></tr></thead><tbody>",
    );
    let mut scopes: Vec<&(String, jeprof_dumpfmt::Estimate)> = page.scopes.iter().collect();
    scopes.sort_by(|a, b| b.1.bytes.total_cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    for (label, e) in scopes {
        out.push_str("<tr><td class=\"name\">");
        push(out, label);
        out.push_str("</td>");
        figure_cells(out, e.bytes, e.bytes_variance, Kind::Bytes);
        let _ = write!(
            out,
            "<td data-v=\"{}\" title=\"{} objects\">{}</td></tr>",
            escape::number(e.objects),
            whole(e.objects),
            units::count(e.objects)
        );
    }
    out.push_str("</tbody></table>");
}

/// At most this many file names are listed; a longer list is summarised as its first and last
/// and how many.
pub const MAX_LISTED_FILES: usize = 4;

/// `paths` for a person: all of them when few, else the first, the last and the count.
fn file_list(out: &mut String, paths: &[String]) {
    let code = |out: &mut String, p: &str| {
        out.push_str("<code>");
        push(out, p);
        out.push_str("</code>");
    };
    if paths.len() <= MAX_LISTED_FILES {
        for (i, p) in paths.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            code(out, p);
        }
        return;
    }
    let _ = write!(out, "{} dumps, from ", paths.len());
    code(out, &paths[0]);
    out.push_str(" to ");
    code(out, &paths[paths.len() - 1]);
}

/// One shell word that names every path of `paths` (their common prefix and suffix around a
/// `*`), or `None` when that pattern would be only `*` around nothing shared.
fn pattern_of(paths: &[String]) -> Option<String> {
    let first = paths.first()?;
    let prefix_len = paths.iter().fold(first.len(), |n, p| {
        first
            .bytes()
            .zip(p.bytes())
            .take(n)
            .take_while(|(a, b)| a == b)
            .count()
    });
    let suffix_len = paths.iter().fold(first.len() - prefix_len, |n, p| {
        first
            .bytes()
            .rev()
            .zip(p.bytes().rev())
            .take(n.min(p.len().saturating_sub(prefix_len)))
            .take_while(|(a, b)| a == b)
            .count()
    });
    let suffix_start = first.len() - suffix_len;
    if !first.is_char_boundary(prefix_len) || !first.is_char_boundary(suffix_start) {
        return None;
    }
    let (prefix, suffix) = (&first[..prefix_len], &first[suffix_start..]);
    let safe = |s: &str| !s.contains(['*', '?', '[', ' ', '\'', '"']);
    (!prefix.is_empty() && safe(prefix) && safe(suffix)).then(|| format!("{prefix}*{suffix}"))
}

fn endpoints_section(out: &mut String, page: &Page) {
    match &page.source {
        Source::Live { pid } => {
            out.push_str("<h2>Endpoints and command lines</h2>");
            let _ = write!(
                out,
                "<p>Served by the profiler's listener in process {pid}. The same profile in \
                 other forms (read-only, like this page):</p><ul>"
            );
            for (path, what) in [
                ("/debug/pprof/heap", "pprof, in use first"),
                ("/debug/pprof/allocs", "pprof, allocated first"),
                ("/debug/pprof/peak", "the heap at its peak"),
                ("/debug/pprof/rss", "pprof, resident bytes first"),
                ("/debug/pprof/leaks", "the stacks still growing"),
                ("/debug/pprof/allocator", "the allocator's figures"),
                ("/pprof/heap", "heap_v2 for jeprof"),
            ] {
                let _ = write!(out, "<li><a href=\"{path}\">{path}</a>: {what}</li>");
            }
            out.push_str("</ul>");
            let host = "<span class=\"host\">127.0.0.1:6060</span>";
            let _ = write!(
                out,
                "<pre>go tool pprof -http=: http://{host}/debug/pprof/heap\n\
                 go tool pprof -sample_index=alloc_space http://{host}/debug/pprof/allocs\n\
                 go tool pprof http://{host}/debug/pprof/peak\n\
                 go tool pprof -top -sample_index=resident_space http://{host}/debug/pprof/rss\n\
                 curl http://{host}/debug/pprof/leaks\n\
                 curl http://{host}/debug/pprof/allocator\n\
                 jeprof --text http://{host}/pprof/heap\n\
                 jeprof-compat report --show_bytes --interval http://{host}/pprof/heap</pre>"
            );
        }
        Source::Dumps(paths) => {
            // No listener to offer: the commands that read these files.
            out.push_str("<h2>The dumps and command lines</h2><p>Made from ");
            file_list(out, paths);
            out.push_str(" (the last is the moment shown).</p>");
            let last = paths.last().map(String::as_str).unwrap_or("heap.prof");
            out.push_str("<pre>");
            for line in [
                format!("jeprof-compat report --show_bytes --interval {last}"),
                format!("jeprof-compat report --allocator {last}"),
                format!("jeprof-compat report --flamegraph heap.svg {last}"),
                format!("jeprof --text {last}"),
            ] {
                push(out, &line);
                out.push('\n');
            }
            if paths.len() > 1 {
                out.push_str("jeprof-compat leaks ");
                match pattern_of(paths) {
                    Some(pattern) if paths.len() > MAX_LISTED_FILES => push(out, &pattern),
                    _ => push(out, &paths.join(" ")),
                }
                out.push('\n');
            }
            out.push_str("</pre>");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_file_list_is_its_first_its_last_and_its_count() {
        let paths: Vec<String> = (0..40).map(|i| format!("/d/redis.{i:02}.heap")).collect();
        let mut out = String::new();
        file_list(&mut out, &paths);
        assert_eq!(
            out,
            "40 dumps, from <code>/d/redis.00.heap</code> to <code>/d/redis.39.heap</code>"
        );
        let mut few = String::new();
        file_list(&mut few, &paths[..2]);
        assert_eq!(
            few,
            "<code>/d/redis.00.heap</code>, <code>/d/redis.01.heap</code>"
        );
        assert_eq!(pattern_of(&paths).as_deref(), Some("/d/redis.*.heap"));
        assert_eq!(pattern_of(&["a.heap".into(), "b.heap".into()]), None);
    }

    #[test]
    fn a_page_from_dumps_offers_no_listener_command_and_a_live_one_does() {
        let mut page = Page {
            title: "t".into(),
            source: Source::Dumps(vec!["x.heap".into()]),
            total: Default::default(),
            sites: Vec::new(),
            folded: Vec::new(),
            allocator: Err("none".into()),
            history: Err("none".into()),
            scopes: Vec::new(),
            growth: None,
            moments: Vec::new(),
        };
        assert!(!render(&page).contains("6060"));
        page.source = Source::Live { pid: 1 };
        assert!(render(&page).contains("<span class=\"host\">127.0.0.1:6060</span>"));
    }
}
