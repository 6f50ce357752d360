//! `report --html OUT.html DUMP...`: the page of `jeprof-page` from dumps. Its rows are the text
//! report's (names and printed figures, byte for byte); `jeprof_page::charge`, which the shim's
//! listener charges with, names and charges a symbolized dump as the report does; a series adds
//! live bytes over time and the suspects; names holding markup render as text, in a real browser
//! too; a dump with residency figures adds a resident column with `report --rss`'s figures, and
//! one without has none.

mod common;
#[path = "common/rss_dump.rs"]
mod rss_dump;

use std::path::{Path, PathBuf};

use jeprof_compat::attribution::Attribution;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::SymbolizeOptions;
use jeprof_conformance::{headless_chromium, html_text, page_site_rows, require_chromium};
use jeprof_dumpfmt::{Estimate, ScopeStack};

const HOSTILE_SCRIPT: &str = "<script>alert(1)</script>";
const HOSTILE_QUOTES: &str = "a<b>&\"'";
const HOSTILE_SCOPE: &str = "<img src=x onerror=alert(2)>";

fn html_of(dumps: &[PathBuf], dir: &Path) -> String {
    let out = dir.join("page.html");
    let mut args = vec![
        "report".to_string(),
        "--html".to_string(),
        out.display().to_string(),
    ];
    args.extend(dumps.iter().map(|d| d.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::run_ok(&refs);
    std::fs::read_to_string(&out).unwrap()
}

/// The text report's rows with a flat figure: (function, flat, "[lo, hi]", cum, "[lo, hi]").
fn report_rows(dump: &Path, measure: &str) -> Vec<(String, String, String, String, String)> {
    let text = common::run_ok(&[
        "report",
        measure,
        "--show_bytes",
        "--interval",
        &dump.display().to_string(),
    ]);
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.len() >= 10 && words[0] != "0").then(|| {
                (
                    words[9..].join(" "),
                    words[0].to_string(),
                    format!("{} {}", words[5], words[6]),
                    words[3].to_string(),
                    format!("{} {}", words[7], words[8]),
                )
            })
        })
        .collect()
}

fn assert_rows_are_the_report_s(html: &str, dump: &Path) {
    let page = page_site_rows(html);
    let bytes = report_rows(dump, "--inuse_space");
    let objects = report_rows(dump, "--inuse_objects");
    assert!(!bytes.is_empty());
    assert_eq!(page.len(), bytes.len(), "{page:?}\n{bytes:?}");
    for (row, want) in page.iter().zip(&bytes) {
        // A frame nothing names: the report prints jeprof's address, the page (one of the
        // project's own views) the mapped object and the offset in it.
        let address = want.0.trim_start_matches("0x");
        let unnamed = address.len() == 16 && address.bytes().all(|b| b.is_ascii_hexdigit());
        if unnamed {
            let (object, offset) = row[0].rsplit_once("+0x").unwrap_or_else(|| {
                panic!("page names {:?} where the report has {:?}", row[0], want.0)
            });
            assert!(!object.is_empty() && u64::from_str_radix(offset, 16).is_ok());
        } else {
            assert_eq!(&row[0], &want.0);
        }
        assert_eq!(
            (&row[1], &row[2], &row[6], &row[7]),
            (&want.1, &want.2, &want.3, &want.4)
        );
        let of = objects.iter().find(|o| o.0 == want.0).unwrap();
        assert_eq!((&row[4], &row[5]), (&of.1, &of.2), "{}", want.0);
    }
}

#[test]
fn the_page_s_rows_are_the_text_report_s_with_unnamed_frames_by_object() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["rust_demo.heap", "symbolized.heap", "pie.heap"] {
        let dump = common::fixtures().join(name);
        let html = html_of(std::slice::from_ref(&dump), dir.path());
        assert_rows_are_the_report_s(&html, &dump);
        let total = common::run_ok(&["report", "--show_bytes", &dump.display().to_string()]);
        let total = total
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap();
        // Read as people read it, the exact figure in the title.
        assert!(
            html.contains(&format!("<b id=\"total-bytes\" title=\"{total} bytes [")),
            "{name}"
        );
        let total: f64 = total.parse().unwrap();
        assert!(
            html.contains(&format!("\">{}</b>", jeprof_page::units::bytes(total))),
            "{name}"
        );
    }
}

#[test]
fn charge_names_and_charges_a_symbolized_dump_as_the_report_does() {
    for name in ["rust_demo.heap", "symbolized.heap"] {
        let dump = common::fixtures().join(name);
        let profile = jeprof_compat::read_dump(&dump, &Default::default()).unwrap();
        let charged = jeprof_page::charge(&profile);
        let options = ReportOptions {
            interval: true,
            attribution: Attribution::user_code(),
            ..ReportOptions::default()
        };
        let resolved = jeprof_compat::resolve(profile.clone(), name, &SymbolizeOptions::default());
        // The flame graph's stacks: `--collapsed`'s lines, equal lines added up.
        let mut folded: std::collections::BTreeMap<String, f64> = Default::default();
        for (line, bytes) in report::collapsed(&[resolved], &options) {
            *folded.entry(line).or_default() += bytes;
        }
        let folded: Vec<(String, f64)> = folded.into_iter().collect();
        assert_eq!(charged.folded, folded, "{name}");
        let report = report::build_dumps(
            &[(profile, name.to_string())],
            &SymbolizeOptions::default(),
            &options,
        );
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        assert!(close(charged.total.bytes, report.total), "{name}");
        let rows: Vec<_> = report
            .rows
            .iter()
            .filter(|r| r.flat != 0.0 || r.cum != 0.0)
            .collect();
        assert_eq!(charged.sites.len(), rows.len(), "{name}");
        for (site, row) in charged.sites.iter().zip(rows) {
            assert_eq!(site.name, row.name, "{name}");
            assert!(close(site.bytes, row.flat), "{name}: {site:?} {row:?}");
            assert!(close(site.cum_bytes, row.cum), "{name}: {site:?} {row:?}");
            assert!(close(site.bytes_variance, row.flat_variance), "{name}");
        }
    }
}

#[test]
fn a_series_adds_live_bytes_over_time_with_the_suspect_marked() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = common::leaking_series(dir.path(), "7");
    dumps.reverse();
    let html = html_of(&dumps, dir.path());
    let last = dumps.iter().max().unwrap();
    assert_rows_are_the_report_s(&html, last);
    assert!(html.contains("<svg class=\"chart\""), "{html}");
    assert!(
        html.contains("<ul id=\"suspects\"><li>fn_1</li></ul>"),
        "{html}"
    );
    assert!(html.contains("suspect: fn_1") && !html.contains("suspect: fn_3"));
    assert!(
        html.contains("12 dumps (12 read), ordered by their time labels; 1 leak suspects among 3"),
        "{html}"
    );
    assert!(
        html.contains("Decided by the 12 dumps read from "),
        "{html}"
    );
}

/// The page of a series for people: the heading names the process and the moment, the list of
/// files is summarised and the command over them is one pattern, and no command is offered for
/// a listener, which a page made from files cannot know exists.
#[test]
fn a_series_page_is_headed_by_process_and_moment_and_summarises_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = common::leaking_series(dir.path(), "7");
    let html = html_of(&dumps, dir.path());
    let heading = &html[html.find("<h1>").unwrap() + 4..html.find("</h1>").unwrap()];
    assert!(
        heading.starts_with("Heap in series-7-11.heap (pid 7) at 20"),
        "{heading}"
    );
    assert!(!html.contains("no time label"));
    let first = dumps[0].display().to_string();
    let last = dumps[11].display().to_string();
    assert!(
        html.contains(&format!(
            "12 dumps, from <code>{first}</code> to <code>{last}</code>"
        )),
        "{html}"
    );
    let pattern = format!("{}/series-7-*.heap", dir.path().display());
    assert!(
        html.contains(&format!("jeprof-compat leaks {pattern}\n")),
        "{html}"
    );
    assert!(!html.contains("6060") && !html.contains("class=\"host\""));
}

#[test]
fn a_series_ending_in_an_exit_dump_says_which_dumps_decided_and_still_marks_the_leak() {
    let dir = tempfile::tempdir().unwrap();
    let mut dumps = common::leaking_series(dir.path(), "7");
    // Hour 12: the process let go of everything but hour 0's heap, as at shutdown.
    let mut profile = jeprof_dumpfmt::read::read_file(&dumps[0]).unwrap();
    let moment = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_507_200 + 3600 * 12);
    jeprof_dumpfmt::labels::set(
        &mut profile.labels,
        "time",
        &jeprof_dumpfmt::labels::rfc3339_utc(moment),
    );
    let last = dir.path().join("series-7-12.heap");
    jeprof_dumpfmt::write::write_file(&profile, &last, &Default::default()).unwrap();
    dumps.push(last);
    let out = dir.path().join("page.html");
    let mut args = vec![
        "report".to_string(),
        "--html".to_string(),
        out.display().to_string(),
    ];
    args.extend(dumps.iter().map(|d| d.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = common::run(&refs);
    assert!(run.status.success() && run.stderr.is_empty(), "{run:?}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(
        html.contains("<ul id=\"suspects\"><li>fn_1</li></ul>"),
        "{html}"
    );
    assert!(html.contains("13 dumps (13 read), ordered by their time labels; 1 leak suspects"));
    assert!(
        html.contains("Decided by the 12 dumps read from series-7-00.heap (dump 0) to series-7-11.heap (dump 11); the last, series-7-12.heap, is taken as the exit dump"),
        "{html}"
    );
}

/// A dump whose function names and scope label hold markup.
fn hostile_dump(dir: &Path) -> PathBuf {
    let mut profile = common::generated_profile(
        &[
            (vec![1, 9], 10.0, 4_000_000.0),
            (vec![3, 9], 20.0, 2_000_000.0),
        ],
        524_288,
        0x40_0000,
    );
    let symbols = profile.symbols.as_mut().unwrap();
    for names in symbols.names.values_mut() {
        match names[0].as_str() {
            "fn_1" => names[0] = HOSTILE_SCRIPT.to_string(),
            "fn_3" => names[0] = HOSTILE_QUOTES.to_string(),
            _ => {}
        }
    }
    profile.scopes = vec![ScopeStack {
        scope: HOSTILE_SCOPE.to_string(),
        frames: profile.stacks[0].frames.clone(),
        inuse: Estimate {
            objects: 5.0,
            bytes: 1_000_000.0,
            ..Estimate::default()
        },
    }];
    let path = dir.join("hostile.heap");
    jeprof_dumpfmt::write::write_file(&profile, &path, &Default::default()).unwrap();
    path
}

/// `<tag` elements in `html` (case-insensitive).
fn elements(html: &str, tag: &str) -> usize {
    html.to_ascii_lowercase()
        .matches(&format!("<{tag}"))
        .count()
}

#[test]
fn names_holding_markup_render_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let dump = hostile_dump(dir.path());
    let html = html_of(std::slice::from_ref(&dump), dir.path());
    let rows = page_site_rows(&html);
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, [HOSTILE_SCRIPT, HOSTILE_QUOTES]);
    // Nothing unescaped anywhere (the flame graph, the table, the scopes, the title).
    assert!(!html.contains(HOSTILE_SCRIPT) && !html.contains("<b>&"));
    assert!(!html.contains("<img"));
    assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"));
    // Two scripts: inferno's and the page's own.
    assert_eq!(elements(&html, "script"), 2);
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_eq!(html_text("&lt;script&gt;"), "<script>");
}

#[test]
fn chromium_renders_the_offline_file_with_hostile_names_as_text() {
    let Some(chromium) = require_chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dump = hostile_dump(dir.path());
    let html = html_of(std::slice::from_ref(&dump), dir.path());
    let file = dir.path().join("page.html");
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("page-offline.png");
    let dom = headless_chromium(
        &chromium,
        &format!("file://{}", file.display()),
        &screenshot,
    )
    .unwrap();
    assert!(
        dom.contains("<svg") && dom.contains("id=\"frames\""),
        "{dom}"
    );
    // The rows as the report prints them, the hostile names as text.
    assert_rows_are_the_report_s(&dom, &dump);
    assert_eq!(page_site_rows(&dom)[0][0], HOSTILE_SCRIPT);
    // No element was injected: as many scripts and images as the page itself has.
    assert_eq!(elements(&dom, "script"), elements(&html, "script"));
    assert_eq!(elements(&dom, "img"), 0);
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    println!("screenshot: {}", screenshot.display());
}

/// `report --html OUT --base EARLIER NOW`: what grew, drawn as a differential flame graph (in
/// place of the plain one) and listed per site, a row coloured only where `diff`'s interval test
/// finds the change significant: the leak grew, the steady site did not move and is not coloured.
/// In Chromium too, with a screenshot for a person to look at (and one of the series' page, one
/// moment, beside it).
#[test]
fn what_grew_colours_only_the_significant_changes_and_draws_them_differentially() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = common::leaking_series(dir.path(), "7");
    let out = dir.path().join("grew.html");
    let (base, now) = (
        dumps[0].display().to_string(),
        dumps[11].display().to_string(),
    );
    common::run_ok(&[
        "report",
        "--html",
        &out.display().to_string(),
        "--base",
        &base,
        &now,
    ]);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(
        html.contains("<h2>What grew since Heap in series-7-00.heap (pid 7) at 20"),
        "{html}"
    );
    let growth = &html[html.find("<table id=\"growth\">").unwrap()..];
    let growth = &growth[..growth.find("</table>").unwrap()];
    assert!(
        growth.contains("<tr class=\"grew\"><td class=\"name\">fn_1</td>"),
        "{growth}"
    );
    assert!(
        growth.contains("<tr><td class=\"name\">fn_3</td>"),
        "{growth}"
    );
    // The differential flame graph replaces the plain one: one inferno drawing per page.
    assert!(!html.contains("<h2>In-use flame graph</h2>"));
    assert_eq!(html.matches("<div class=\"flame\">").count(), 1);
    let Some(chromium) = require_chromium() else {
        return;
    };
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dom = headless_chromium(
        &chromium,
        &format!("file://{}", out.display()),
        &shots.join("page-what-grew.png"),
    )
    .unwrap();
    assert!(dom.contains("<tr class=\"grew\"><td class=\"name\">fn_1</td>"));
    let series = dir.path().join("page.html");
    html_of(&dumps, dir.path());
    let dom = headless_chromium(
        &chromium,
        &format!("file://{}", series.display()),
        &shots.join("page-one-moment.png"),
    )
    .unwrap();
    assert!(dom.contains("<svg class=\"chart\""));
    println!(
        "screenshots: {} and {}",
        shots.join("page-what-grew.png").display(),
        shots.join("page-one-moment.png").display()
    );
}

#[test]
fn the_resident_column_shows_report_rss_figures_only_for_dumps_that_have_them() {
    let dir = tempfile::tempdir().unwrap();
    let with = dir.path().join("with.heap");
    rss_dump::write_dump(&with, Some(true));
    let html = html_of(std::slice::from_ref(&with), dir.path());
    let json = common::run_ok(&["report", "--rss", "--json", with.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(html.contains("<th>resident</th>"), "{html}");
    assert!(html.contains("<p class=\"note\" id=\"resident-reading\">resident: bytes of the site's live objects on present pages"));
    let rows = page_site_rows(&html);
    // The shim's page charges the same dump with `jeprof_page::charge`.
    let profile = jeprof_compat::read_dump(&with, &Default::default()).unwrap();
    let charged = jeprof_page::charge(&profile);
    let sites = v["sites"].as_array().unwrap();
    assert_eq!(rows.len(), sites.len(), "{rows:?}\n{json}");
    for site in sites {
        let function = site["function"].as_str().unwrap();
        let row = rows.iter().find(|r| r[0] == function).unwrap();
        let resident = site["resident_bytes"].as_f64().unwrap();
        let (lo, hi) = (
            site["resident_bytes_lo"].as_f64().unwrap(),
            site["resident_bytes_hi"].as_f64().unwrap(),
        );
        // The exact figure in the cell's title, its interval as the in-use column shows one.
        assert_eq!(row.len(), 10, "{row:?}");
        assert_eq!(row[8], format!("{resident:.0}"), "{function}: {row:?}");
        let ends: Vec<f64> = row[9]
            .trim_matches(['[', ']'])
            .split(", ")
            .map(|x| x.parse().unwrap())
            .collect();
        assert!(
            (ends[0] - lo).abs() <= 1.0 && (ends[1] - hi).abs() <= 1.0,
            "{function}: {row:?}, report --rss [{lo}, {hi}]"
        );
        let shown = charged.sites.iter().find(|s| s.name == function).unwrap();
        assert_eq!(
            shown.resident.map(|r| r.bytes),
            Some(resident),
            "{function}"
        );
    }
    let fn_3 = rows.iter().find(|r| r[0] == "fn_3").unwrap();
    assert_eq!(fn_3[8], "8000");

    let without = dir.path().join("without.heap");
    rss_dump::write_dump(&without, None);
    let html = html_of(std::slice::from_ref(&without), dir.path());
    assert!(!html.contains("<th>resident</th>"), "{html}");
    assert!(!html.contains("resident-reading"), "{html}");
    assert!(page_site_rows(&html).iter().all(|r| r.len() == 8));
    let profile = jeprof_compat::read_dump(&without, &Default::default()).unwrap();
    assert!(jeprof_page::charge(&profile)
        .sites
        .iter()
        .all(|s| s.resident.is_none()));
}
