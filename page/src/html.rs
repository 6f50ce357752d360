//! The page: one HTML document, its CSS and script inline, nothing fetched from anywhere.

use std::fmt::Write as _;

use jeprof_dumpfmt::math::confidence_interval_95;

use crate::escape::{self, push};
use crate::model::{Page, Site, Source};
use crate::{chart, flame};

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
pre{background:#f6f6f6;padding:.6em;overflow-x:auto}code{background:#f6f6f6}\
.note{color:#666}.flame{overflow-x:auto}";

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
    let _ = write!(
        out,
        "<p>In use: <b id=\"total-bytes\">{}</b> bytes {} in <b>{}</b> objects {} (95% intervals), \
         unbiased estimates from sampled allocations.</p>",
        whole(page.total.bytes),
        interval(page.total.bytes, page.total.bytes_variance),
        whole(page.total.objects),
        interval(page.total.objects, page.total.objects_variance),
    );
    flame_section(&mut out, page);
    sites_section(&mut out, &page.sites);
    allocator_section(&mut out, page);
    history_section(&mut out, page);
    scopes_section(&mut out, page);
    endpoints_section(&mut out, page);
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
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
    match flame::svg(&folded, "inuse_space") {
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
    if left_out > 0 {
        let _ = write!(
            out,
            "<p class=\"note\">The {MAX_FOLDED} largest stacks are drawn; {left_out} smaller \
             ones are left out.</p>"
        );
    }
}

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
    out.push_str(
        "<table id=\"sites\"><thead><tr><th class=\"name\">function</th><th>flat bytes</th>\
         <th>95% interval</th><th>flat %</th><th>flat objects</th><th>95% interval</th>\
         <th>cum bytes</th><th>95% interval</th></tr></thead><tbody>",
    );
    for s in sites.iter().take(MAX_SITES) {
        let s = *s;
        let (low, _) = confidence_interval_95(s.bytes, s.bytes_variance);
        let (objects_low, _) = confidence_interval_95(s.objects, s.objects_variance);
        let (cum_low, _) = confidence_interval_95(s.cum_bytes, s.cum_bytes_variance);
        let share = if shown_total != 0.0 {
            100.0 * s.bytes / shown_total
        } else {
            0.0
        };
        out.push_str("<tr><td class=\"name\">");
        push(out, &s.name);
        let _ = write!(
            out,
            "</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{share:.1}%</td>\
             <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>\
             <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td></tr>",
            escape::number(s.bytes),
            whole(s.bytes),
            escape::number(low),
            interval(s.bytes, s.bytes_variance),
            escape::number(share),
            escape::number(s.objects),
            whole(s.objects),
            escape::number(objects_low),
            interval(s.objects, s.objects_variance),
            escape::number(s.cum_bytes),
            whole(s.cum_bytes),
            escape::number(cum_low),
            interval(s.cum_bytes, s.cum_bytes_variance),
        );
    }
    out.push_str("</tbody></table>");
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
        let _ = write!(
            out,
            "</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            whole(e.bytes),
            interval(e.bytes, e.bytes_variance),
            whole(e.objects)
        );
    }
    out.push_str("</tbody></table>");
}

fn endpoints_section(out: &mut String, page: &Page) {
    out.push_str("<h2>Endpoints and command lines</h2>");
    let host = "<span class=\"host\">127.0.0.1:6060</span>";
    match &page.source {
        Source::Live { pid } => {
            let _ = write!(
                out,
                "<p>Served by the profiler's listener in process {pid}. The same profile in \
                 other forms (read-only, like this page):</p><ul>"
            );
            for (path, what) in [
                ("/debug/pprof/heap", "pprof, in use first"),
                ("/debug/pprof/allocs", "pprof, allocated first"),
                ("/debug/pprof/peak", "the heap at its peak"),
                ("/debug/pprof/leaks", "the stacks still growing"),
                ("/debug/pprof/allocator", "the allocator's figures"),
                ("/pprof/heap", "heap_v2 for jeprof"),
            ] {
                let _ = write!(out, "<li><a href=\"{path}\">{path}</a>: {what}</li>");
            }
            out.push_str("</ul>");
        }
        Source::Dumps(paths) => {
            out.push_str("<p>Made from ");
            for (i, p) in paths.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str("<code>");
                push(out, p);
                out.push_str("</code>");
            }
            out.push_str(
                " (the last is the moment shown). A process running the shim's listener serves \
                 the same page at <code>/</code>, and its profiles at the endpoints below.</p>",
            );
        }
    }
    let _ = write!(
        out,
        "<pre>go tool pprof -http=: http://{host}/debug/pprof/heap\n\
         go tool pprof -sample_index=alloc_space http://{host}/debug/pprof/allocs\n\
         go tool pprof http://{host}/debug/pprof/peak\n\
         curl http://{host}/debug/pprof/leaks\n\
         curl http://{host}/debug/pprof/allocator\n\
         jeprof --text http://{host}/pprof/heap\n\
         jeprof-compat report --show_bytes --interval http://{host}/pprof/heap</pre>"
    );
    if let Source::Dumps(paths) = &page.source {
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
            push(out, &paths.join(" "));
            out.push('\n');
        }
        out.push_str("</pre>");
    }
}
