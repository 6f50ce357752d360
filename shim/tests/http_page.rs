//! `GET /`: the heap as one HTML page, served by the listener, with the figures `jeprof-compat
//! report --show_bytes --interval` prints for a dump of the same moment; and the same page in a
//! real browser (headless Chromium): the flame graph's SVG is in the rendered DOM, the top rows
//! name this program's functions with the report's figures, and the page's own script ran.

#[path = "common/http.rs"]
mod client;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use jeprof_compat::attribution::Attribution;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::{ReadPolicy, SymbolizeOptions};
use jeprof_conformance::{headless_chromium, page_site_rows, require_chromium};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// 64 buffers of 256 KiB: 16 MiB under one function.
#[inline(never)]
fn page_held_buffers() -> Vec<Vec<u8>> {
    (0..64)
        .map(|i| std::hint::black_box(vec![i as u8; 256 * 1024]))
        .collect()
}

/// 100,000 vectors of 64 bytes: 6.4 MB of small objects under another.
#[inline(never)]
fn page_held_boxes() -> Vec<Vec<u8>> {
    (0..100_000)
        .map(|i| std::hint::black_box(vec![i as u8; 64]))
        .collect()
}

/// The held heap and the listener, set up once; the tests take turns (the heap must not change
/// between a page and the dump it is compared with).
struct Served {
    addr: SocketAddr,
    _buffers: Vec<Vec<u8>>,
    _boxes: Vec<Vec<u8>>,
}

fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        jeprof_shim::configure(
            "sample_rate:65536,symbolize:true,leak_interval:0.1,leak_history:4096",
        )
        .unwrap();
        let buffers = page_held_buffers();
        let boxes = page_held_boxes();
        // A few snapshots of the leak history, for the chart of live bytes over time.
        let start = std::time::Instant::now();
        while jeprof_shim::stats().leak_snapshots < 3 {
            assert!(start.elapsed().as_secs() < 30, "no leak history after 30 s");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        std::mem::forget(server);
        Served {
            addr,
            _buffers: buffers,
            _boxes: boxes,
        }
    })
}

static TURN: Mutex<()> = Mutex::new(());

/// The page, then the symbolized dump of the same moment, then the report of that dump: its
/// rows as `(function, flat, [flat interval], cum)`, the report's text.
fn page_and_report() -> (String, Vec<(String, String, String, String)>) {
    let served = served();
    let page = client::get(served.addr, "/").unwrap();
    assert_eq!(page.status, 200, "{}", page.text());
    let content_type = page
        .headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.clone());
    assert_eq!(content_type.as_deref(), Some("text/html; charset=utf-8"));
    let dump = client::get(served.addr, "/debug/pprof/heap?debug=1").unwrap();
    assert_eq!(dump.status, 200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moment.heap");
    std::fs::write(&path, &dump.body).unwrap();
    let options = ReportOptions {
        show_bytes: true,
        interval: true,
        attribution: Attribution::user_code(),
        ..ReportOptions::default()
    };
    let table = report::build_files(
        &[path],
        &SymbolizeOptions::default(),
        &options,
        &ReadPolicy::default(),
    )
    .unwrap();
    let mut text = Vec::new();
    table.write_text(&options, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    println!("{text}");
    // `flat flat% sum% cum cum% [lo, hi] [lo, hi] function`.
    let rows = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.len() >= 10).then(|| {
                (
                    words[9..].join(" "),
                    words[0].to_string(),
                    format!("{} {}", words[5], words[6]),
                    words[3].to_string(),
                )
            })
        })
        .collect();
    (page.text(), rows)
}

/// `a` and `b`, integers as printed, within a relative 10⁻³ (a dump carries the figures as the
/// integers jeprof reads back, within 10⁻⁴ of the process's own).
fn close(a: &str, b: &str) -> bool {
    let parse = |s: &str| s.trim_matches(['[', ']', ',']).parse::<f64>().unwrap();
    let (a, b) = (parse(a), parse(b));
    (a - b).abs() <= 1e-3 * a.abs().max(b.abs()) + 1.0
}

/// The page's row for each of this program's two functions, checked against the report's.
fn check_rows(page_rows: &[Vec<String>], report_rows: &[(String, String, String, String)]) {
    for function in [
        "http_page::page_held_buffers::{{closure}} (inline)",
        "http_page::page_held_boxes::{{closure}} (inline)",
    ] {
        let theirs = report_rows
            .iter()
            .position(|r| r.0 == function)
            .unwrap_or_else(|| panic!("{function} not in the report"));
        let ours = page_rows
            .iter()
            .position(|r| r[0] == function)
            .unwrap_or_else(|| panic!("{function} not on the page: {page_rows:?}"));
        assert!(
            ours < 3 && theirs < 3,
            "{function}: row {ours}, report {theirs}"
        );
        let (row, want) = (&page_rows[ours], &report_rows[theirs]);
        assert!(
            close(&row[1], &want.1),
            "{function} flat: {row:?} vs {want:?}"
        );
        let (lo, hi) = row[2].split_once(' ').unwrap();
        let (want_lo, want_hi) = want.2.split_once(' ').unwrap();
        assert!(
            close(lo, want_lo) && close(hi, want_hi),
            "{function} interval: {row:?} vs {want:?}"
        );
        assert!(
            close(&row[6], &want.3),
            "{function} cum: {row:?} vs {want:?}"
        );
    }
}

#[test]
fn the_page_shows_the_figures_report_prints_for_a_dump_of_the_moment() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let (html, report_rows) = page_and_report();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: nothing fetched from another address (the SVG's `url(#…)` are its own
    // elements, `xmlns` names no resource).
    for external in [
        "src=\"",
        "href=\"http",
        "href=\"//",
        "@import",
        "url(http",
        "url(//",
    ] {
        assert!(!html.contains(external), "{external}");
    }
    assert!(html.contains("<svg") && html.contains("id=\"frames\""));
    assert!(html.contains("page_held_buffers"));
    let rows = page_site_rows(&html);
    check_rows(&rows, &report_rows);
    // With `rss` on (the default), each site's resident bytes, and what they count.
    assert!(html.contains("<th>resident</th>"), "{html}");
    assert!(html.contains("id=\"resident-reading\""), "{html}");
    assert!(rows.iter().all(|r| r.len() == 10), "{rows:?}");
    // Live bytes over time from the leak history, this program's largest site the first line
    // (named as /debug/pprof/leaks names its suspects and the table its rows, by the charging
    // engine: ` (inline)` where the closure was inlined).
    assert!(html.contains("<svg class=\"chart\""), "{html}");
    let chart = &html[html.find("<svg class=\"chart\"").unwrap()..];
    // One of the chart's lines (the other test of this process, `/?since=`, adds its own sites
    // to the history when it runs first).
    let lines: Vec<&str> = chart
        .split("<title>")
        .skip(1)
        .filter_map(|t| t.split_once("</title>"))
        .map(|(name, _)| name)
        .collect();
    let line = lines
        .iter()
        .find(|l| l.starts_with("http_page::page_held_buffers::{{closure}}"))
        .unwrap_or_else(|| panic!("{chart}"));
    assert!(
        rows.iter().any(|r| r[0] == *line),
        "the chart's line {line:?} is not named as a row of the table"
    );
    // The allocator's reading of the same snapshot.
    assert!(html.contains("<pre id=\"allocator\">allocated: "), "{html}");
    // The endpoints, linked.
    for path in [
        "/debug/pprof/heap",
        "/debug/pprof/allocs",
        "/debug/pprof/peak",
        "/debug/pprof/rss",
        "/debug/pprof/leaks",
    ] {
        assert!(html.contains(&format!("<a href=\"{path}\">")), "{path}");
    }
    // Read-only: any other method is refused.
    let post = client::post(served().addr, "/", b"x").unwrap();
    assert_eq!(post.status, 405);
}

#[test]
fn chromium_renders_the_served_page_with_its_flame_graph_and_the_report_s_figures() {
    let Some(chromium) = require_chromium() else {
        return;
    };
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let (_, report_rows) = page_and_report();
    let addr = served().addr;
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("page-served.png");
    let dom = headless_chromium(&chromium, &format!("http://{addr}/"), &screenshot).unwrap();
    // The flame graph's SVG, with inferno's frames, in the rendered DOM.
    assert!(
        dom.contains("<svg") && dom.contains("id=\"frames\""),
        "{dom}"
    );
    // The page's script ran: it wrote the listener's address into the command lines.
    assert!(
        dom.contains(&format!("<span class=\"host\">{addr}</span>")),
        "{dom}"
    );
    check_rows(&page_site_rows(&dom), &report_rows);
    let size = std::fs::metadata(&screenshot).unwrap().len();
    assert!(size > 10_000, "{size} bytes");
    println!("screenshot: {}", screenshot.display());
}

/// 32 buffers of 256 KiB allocated after the first snapshots: what grew.
#[inline(never)]
fn page_grown_buffers() -> Vec<Vec<u8>> {
    (0..32)
        .map(|i| std::hint::black_box(vec![i as u8; 256 * 1024]))
        .collect()
}

/// `/?since=`: what grew over the in-process history, the buffers allocated since coloured as
/// grown (their change's interval excludes zero) and the steady sites not; a menu of the moments
/// the history holds; a duration that is not one is refused. In Chromium, with a screenshot.
#[test]
fn since_shows_what_grew_over_the_history_with_a_menu_of_its_moments() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let addr = served().addr;
    let wait_for = |snapshots: u64| {
        let start = std::time::Instant::now();
        while jeprof_shim::stats().leak_snapshots < snapshots {
            assert!(start.elapsed().as_secs() < 30, "no new snapshot after 30 s");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    // A snapshot of the held heap, then the buffers, then two more snapshots.
    let before = jeprof_shim::stats().leak_snapshots;
    wait_for(before + 1);
    let allocated = std::time::Instant::now();
    let grown = page_grown_buffers();
    wait_for(before + 3);
    // Since before the buffers were allocated, with room for a loaded machine: `since` is
    // counted back from the last snapshot, which moves on while the request is on its way, so a
    // since of exactly the buffers' age can land after them. Ten seconds more reaches a snapshot
    // before them (the history, 4096 snapshots, holds every one since the listener started).
    let since = format!("/?since={:.3}s", allocated.elapsed().as_secs_f64() + 10.0);
    let page = client::get(addr, &since).unwrap();
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(html.contains("<h2>What grew since "), "{html}");
    let table = &html[html.find("<table id=\"growth\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let row = |name: &str| {
        table
            .split("<tr")
            .find(|r| r.contains(&format!("<td class=\"name\">http_page::{name}")))
            .unwrap_or_else(|| panic!("no row for {name}: {table}"))
            .to_string()
    };
    assert!(
        row("page_grown_buffers").starts_with(" class=\"grew\""),
        "{table}"
    );
    assert!(row("page_held_buffers").starts_with('>'), "{table}");
    assert!(
        html.contains("<nav class=\"moments\" id=\"moments\">"),
        "{html}"
    );
    assert!(html.contains("href=\"/?since="), "{html}");
    assert_eq!(client::get(addr, "/?since=soon").unwrap().status, 400);
    // Older than the history reaches: its oldest snapshot.
    assert_eq!(client::get(addr, "/?since=24h").unwrap().status, 200);
    if let Some(chromium) = require_chromium() {
        let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("page-served-since.png");
        // Chromium loads the page a second or more from now, when `since` would reach back only
        // to after the buffers: so it asks for the oldest snapshot, taken before them.
        let dom = headless_chromium(&chromium, &format!("http://{addr}/?since=24h"), &screenshot)
            .unwrap();
        assert!(dom.contains("class=\"grew\""), "{dom}");
        println!("screenshot: {}", screenshot.display());
    }
    drop(grown);
}
