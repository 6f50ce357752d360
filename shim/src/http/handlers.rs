//! The endpoints as plain functions: a [`Request`] in, a [`Response`] out, no I/O, so a program
//! can mount them in its own router (see `examples/axum.rs`) as well as behind [`super::serve`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jeprof_dumpfmt::{Profile, Stack, WriteOptions};

use crate::api::pprof::SampleType;
use crate::base::settings;
use crate::base::thread::Guard;
use crate::parts::symbolize;
use crate::profiler::allocation_window::AllocationProfile;
use crate::profiler::leak_history::{self, Found};
use crate::profiler::pprof::{encode, PprofOptions};
use crate::profiler::{auto_dump, init, report, scopes};

pub use crate::api::http::{
    Request, Response, MAX_CONCURRENT_WINDOWS, MAX_SYMBOL_BODY, MAX_WINDOW_SECONDS, PATHS,
};

impl Response {
    fn ok(content_type: &'static str, body: Vec<u8>) -> Response {
        Response {
            status: 200,
            content_type,
            body,
        }
    }
}

/// Serves one request. Everything it allocates is outside sampling (it runs inside the profiler's
/// re-entrancy guard), so serving a profile never shows in the profile. `?seconds=N` requests
/// block for N seconds.
pub fn handle(request: &Request<'_>) -> Response {
    let _guard = Guard::enter();
    let path = request.path;
    let Some(&known) = PATHS.iter().find(|&&p| p == path) else {
        return Response::error(
            404,
            format_args!("unknown path `{path}` (served: {})", PATHS.join(", ")),
        );
    };
    let method_ok = match known {
        "/pprof/symbol" | "/debug/pprof/symbol" => {
            matches!(request.method, "GET" | "POST" | "HEAD")
        }
        _ => matches!(request.method, "GET" | "HEAD"),
    };
    if !method_ok {
        return Response::error(
            405,
            format_args!("{} does not serve {}", known, request.method),
        );
    }
    let params = match Params::parse(request.query) {
        Ok(p) => p,
        Err(why) => return Response::error(400, why),
    };
    match known {
        "/" => match since_param(request.query) {
            Ok(since) => page(since),
            Err(why) => Response::error(400, why),
        },
        "/debug/pprof/heap" => go_heap(&params, SampleType::InuseSpace),
        "/debug/pprof/allocs" => go_heap(&params, SampleType::AllocSpace),
        "/debug/pprof/peak" => peak(&params),
        "/debug/pprof/rss" => rss(&params),
        "/debug/pprof/allocator" => allocator(),
        "/debug/pprof/leaks" => leaks(request.query),
        "/pprof/heap" => legacy_heap(&params),
        // Go's pprof posts the same body to `/debug/pprof/symbol` for the locations of a mapping
        // that does not claim functions (frames nothing named), and stops on an error there.
        "/pprof/symbol" | "/debug/pprof/symbol" if request.method == "POST" => {
            symbols(request.body)
        }
        // jeprof's CheckSymbolPage only asks whether symbols can be had at all.
        "/pprof/symbol" | "/debug/pprof/symbol" => {
            Response::ok("text/plain", b"num_symbols: 1\n".to_vec())
        }
        _ => cmdline(),
    }
}

/// The query parameters Go's `/debug/pprof/heap` takes: `seconds`, `debug`, `gc` (accepted and
/// ignored: there is no collector to run), and ours, `scope` (one scope's live samples). Others
/// are ignored, as Go does.
struct Params {
    seconds: Option<u64>,
    debug: u64,
    scope: Option<String>,
}

impl Params {
    fn parse(query: &str) -> Result<Params, String> {
        let mut values: HashMap<String, String> = HashMap::new();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            values.insert(k.into_owned(), v.into_owned());
        }
        let number = |key: &str| -> Result<Option<u64>, String> {
            values
                .get(key)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| format!("`{key}={v}`: expected a non-negative integer"))
                })
                .transpose()
        };
        let seconds = number("seconds")?;
        if let Some(s) = seconds {
            if !(1..=MAX_WINDOW_SECONDS).contains(&s) {
                return Err(format!("`seconds={s}`: expected 1 to {MAX_WINDOW_SECONDS}"));
            }
        }
        number("gc")?;
        let scope = values.get("scope").cloned();
        if scope.is_some() && seconds.is_some() {
            return Err(
                "`scope` and `seconds` together: a window's samples are not kept per \
                        scope; ask for one or the other"
                    .into(),
            );
        }
        Ok(Params {
            seconds,
            debug: number("debug")?.unwrap_or(0),
            scope,
        })
    }
}

/// `/debug/pprof/heap` and `/allocs`: the same four sample types, a different one first. With
/// `seconds=N`, a delta profile: `alloc_*` count what was allocated in the N seconds, `inuse_*`
/// are the current figures (Go subtracts in-use figures too, which means nothing for a quantity
/// that is not cumulative). `debug=1` or more: the heap_v2 text, symbolized.
fn go_heap(params: &Params, first: SampleType) -> Response {
    let mut options = PprofOptions {
        default_sample_type: first,
        ..PprofOptions::default()
    };
    if let Some(label) = &params.scope {
        return match scopes::scope_profile(label, false) {
            Some(profile) => respond(profile, params, &options),
            None => unknown_scope(label),
        };
    }
    let profile = match params.seconds {
        None => report::snapshot(false).0,
        Some(seconds) => {
            let Some(_slot) = WindowSlot::take() else {
                return Response::error(
                    503,
                    format_args!(
                        "{MAX_CONCURRENT_WINDOWS} requests with `seconds` are already waiting; \
                         retry later"
                    ),
                );
            };
            init::ensure_init();
            let window = AllocationProfile::start();
            std::thread::sleep(Duration::from_secs(seconds));
            let window = window.stop();
            options.time = Some(window.started);
            options.duration = window.duration;
            options.comments.push(format!(
                "delta: alloc_* over the last {seconds} s; inuse_* now"
            ));
            window_with_current_inuse(&window.profile, report::snapshot(false).0)
        }
    };
    respond(profile, params, &options)
}

/// `/debug/pprof/peak`: the live samples at the highest estimated live bytes.
fn peak(params: &Params) -> Response {
    if params.seconds.is_some() {
        return Response::error(400, "`seconds` means nothing for the peak profile");
    }
    if params.scope.is_some() {
        return Response::error(
            400,
            "`scope` is not served for the peak profile (ask /debug/pprof/heap?scope=…)",
        );
    }
    let options = PprofOptions {
        comments: vec![
            "peak heap: the live samples when the estimated live bytes were highest".into(),
        ],
        ..PprofOptions::default()
    };
    respond(auto_dump::peak_profile(false), params, &options)
}

/// Symbolizes `profile` (when the `symbolize` setting is on) and encodes it as gzipped pprof, or
/// as heap_v2 text for `debug` ≥ 1.
fn respond(mut profile: Profile, params: &Params, options: &PprofOptions) -> Response {
    if settings::symbolize() {
        report::add_symbols(&mut profile);
    }
    if params.debug > 0 {
        return heap_v2(&profile, true);
    }
    gzipped(&encode(&profile, options))
}

/// `/debug/pprof/rss`: the live heap with each stack's resident, swapped and stranded slab
/// bytes ([`jeprof_dumpfmt::pprof::rss`]), `resident_space` first; `debug` ≥ 1, the heap_v2
/// text whose `rss_site` annotations carry the same figures with their variances. 404 when the
/// `rss` setting is off, 503 when the page map could not be read, each with the reason.
fn rss(params: &Params) -> Response {
    if params.seconds.is_some() || params.scope.is_some() {
        return Response::error(
            400,
            "`seconds` and `scope` are not served for the residency profile (it is of the \
             whole live heap now)",
        );
    }
    let mut profile = report::snapshot(false).0;
    let figures =
        match jeprof_dumpfmt::rss::RssFigures::from_annotations(&profile.annotations) {
            Ok(Some(figures)) => figures,
            Ok(None) => return Response::error(
                404,
                "no residency figures: the `rss` setting is off (JEPROF_SHIM=rss:true turns it on)",
            ),
            Err(e) => return Response::error(500, format_args!("the residency figures: {e}")),
        };
    if let Err(why) = &figures.pagemap {
        return Response::error(
            503,
            format_args!("residency unknown: /proc/self/pagemap is unreadable ({why})"),
        );
    }
    if settings::symbolize() {
        report::add_symbols(&mut profile);
    }
    if params.debug > 0 {
        return heap_v2(&profile, true);
    }
    gzipped(&crate::profiler::pprof::encode_rss(
        &profile,
        &figures,
        &PprofOptions::default(),
    ))
}

/// `pb` gzipped, as `go tool pprof` reads it.
fn gzipped(pb: &jeprof_dumpfmt::pprof::PbProfile) -> Response {
    let mut body = Vec::new();
    match jeprof_dumpfmt::pprof::write_gz(pb, &mut body) {
        Ok(()) => Response::ok("application/octet-stream", body),
        Err(e) => Response::error(500, format_args!("encoding the profile failed: {e}")),
    }
}

/// `profile` as heap_v2 text (with its symbol section when `symbols`).
fn heap_v2(profile: &Profile, symbols: bool) -> Response {
    let mut body = Vec::new();
    let options = WriteOptions {
        symbols,
        ..WriteOptions::default()
    };
    match jeprof_dumpfmt::write::write(profile, &mut body, &options) {
        Ok(()) => Response::ok("text/plain; charset=utf-8", body),
        Err(e) => Response::error(500, format_args!("writing the profile failed: {e}")),
    }
}

/// The window's `accum` per stack with the current `inuse` per stack (stacks matched by frames);
/// per-thread figures are left out, as a window has none.
fn window_with_current_inuse(window: &Profile, current: Profile) -> Profile {
    let mut merged = Profile::new(current.sample_period);
    let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
    for stack in current.stacks {
        if stack.counts.inuse.objects > 0.0 {
            index.insert(stack.frames.clone(), merged.stacks.len());
            merged.stacks.push(Stack {
                frames: stack.frames,
                counts: jeprof_dumpfmt::Counts {
                    inuse: stack.counts.inuse,
                    accum: Default::default(),
                },
                threads: Vec::new(),
            });
        }
    }
    for stack in &window.stacks {
        match index.get(&stack.frames) {
            Some(&i) => merged.stacks[i].counts.accum = stack.counts.accum,
            None => merged.stacks.push(Stack {
                frames: stack.frames.clone(),
                counts: jeprof_dumpfmt::Counts {
                    inuse: Default::default(),
                    accum: stack.counts.accum,
                },
                threads: Vec::new(),
            }),
        }
    }
    merged.mapped_libraries = current.mapped_libraries;
    merged.annotations = current.annotations;
    merged.labels = current.labels;
    merged
        .annotations
        .extend(window.annotations.iter().cloned());
    merged
}

/// One of the [`MAX_CONCURRENT_WINDOWS`] places for a waiting `?seconds=` request.
struct WindowSlot;

/// `?seconds=` requests waiting now.
static WINDOWS_WAITING: AtomicUsize = AtomicUsize::new(0);

impl WindowSlot {
    fn take() -> Option<WindowSlot> {
        // Ordering: a counter that publishes nothing; the update is one atomic step.
        WINDOWS_WAITING
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_CONCURRENT_WINDOWS).then_some(n + 1)
            })
            .ok()
            .map(|_| WindowSlot)
    }
}

impl Drop for WindowSlot {
    fn drop(&mut self) {
        // Ordering: see `take`.
        WINDOWS_WAITING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `/?since=DURATION`: seconds, or a number with `s`, `m` or `h` (`90s`, `5m`, `1.5h`).
fn since_param(query: &str) -> Result<Option<Duration>, String> {
    let Some((_, value)) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "since")
    else {
        return Ok(None);
    };
    let (number, unit) = match value.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&value[..i], &value[i..]),
        None => (&value[..], "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && n.is_finite() && scale.is_finite() => {
            Ok(Some(Duration::from_secs_f64(n * scale)))
        }
        _ => Err(format!(
            "`since={value}`: expected a duration such as 90s, 5m or 1h"
        )),
    }
}

/// What grew over the in-process leak history since `since` before its last snapshot
/// ([`leak_history::growth_since`]), as the page's [`jeprof_page::Growth`]: per user frame the
/// summed change of its stacks with the 95% interval of independent sides (`diff`'s test), and
/// the stacks then and now for the differential flame graph. `None` before two snapshots.
fn live_growth(since: Duration) -> Option<jeprof_page::Growth> {
    use jeprof_page::{units, Change, Growth};
    let (age, taken, stacks) = leak_history::growth_since(since)?;
    let mut changes: Vec<Change> = Vec::new();
    let mut variances: Vec<f64> = Vec::new();
    let mut folded = Vec::with_capacity(stacks.len());
    for s in stacks {
        let i = match changes.iter().position(|c| c.name == s.function) {
            Some(i) => i,
            None => {
                changes.push(Change {
                    name: s.function.clone(),
                    ..Change::default()
                });
                variances.push(0.0);
                changes.len() - 1
            }
        };
        changes[i].base += s.then.0;
        changes[i].new += s.now.0;
        variances[i] += s.then.1 + s.now.1;
        let stack: Vec<&str> = s.functions.iter().rev().map(String::as_str).collect();
        folded.push((stack.join(";"), s.then.0, s.now.0));
    }
    for (c, v) in changes.iter_mut().zip(variances) {
        c.delta = c.new - c.base;
        c.half_width = jeprof_dumpfmt::math::Z_95 * v.max(0.0).sqrt();
    }
    changes.sort_by(|a, b| {
        b.delta
            .abs()
            .total_cmp(&a.delta.abs())
            .then(a.name.cmp(&b.name))
    });
    let when = jeprof_dumpfmt::labels::rfc3339_utc(taken);
    Some(Growth {
        base: format!("{} before the last snapshot ({when})", units::duration(age)),
        folded,
        changes,
        note: format!(
            "From the in-process leak history (one snapshot every leak_interval): each \
             snapshot keeps the {} stacks with the most live bytes, so a stack outside them \
             counts zero there, and the last snapshot stands for now.",
            crate::base::settings::LEAK_HISTORY_STACKS
        ),
    })
}

/// The page's menu of moments: round ages the leak history reaches back to (a minute, five,
/// fifteen, an hour, six, a day) and its oldest snapshot, each a `/?since=` link.
fn moments() -> Vec<(String, String)> {
    let ages = leak_history::ages();
    let Some(&oldest) = ages.first() else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = [60.0, 300.0, 900.0, 3600.0, 21_600.0, 86_400.0]
        .into_iter()
        .filter(|&a| a < oldest)
        .map(|a| (jeprof_page::units::duration(a), format!("/?since={a}s")))
        .collect();
    out.push((
        format!(
            "the oldest snapshot ({})",
            jeprof_page::units::duration(oldest)
        ),
        format!("/?since={:.3}s", oldest),
    ));
    out
}

/// User frames drawn over time on the page (`/`): the largest now.
const PAGE_HISTORY_SITES: usize = 8;

/// `/`: the heap as one self-contained HTML page ([`jeprof_page`]): the profile now, symbolized
/// in-process and charged as `jeprof-compat report` charges a dump of it ([`jeprof_page::charge`]),
/// the allocator's figures of the same moment (the snapshot's own, as its dump carries them), the
/// scopes, and live bytes over time from the in-process leak history with its suspects marked.
fn page(since: Option<Duration>) -> Response {
    use jeprof_dumpfmt::allocator::{describe, AllocatorFigures};
    use jeprof_page::{History, Page, Series, Source};
    init::ensure_init();
    leak_history::ensure_recorder();
    let mut profile = report::snapshot(false).0;
    report::add_symbols(&mut profile);
    let charged = jeprof_page::charge(&profile);
    let allocator = AllocatorFigures::from_annotations(&profile.annotations)
        .map(|figures| describe(&figures, Some(&charged.total), 1))
        .map_err(|e| format!("no allocator figures: {e}"));
    let scopes = jeprof_dumpfmt::scopes::scope_totals(&profile)
        .into_iter()
        .collect();
    let when = jeprof_dumpfmt::labels::get(&profile.labels, "time")
        .unwrap_or("now")
        .to_string();
    drop(profile);
    let options = jeprof_dumpfmt::leaks::LeakOptions::default();
    let (suspects, verdict): (Vec<String>, String) = match leak_history::find(&options) {
        Ok(found) => (
            found
                .suspects
                .iter()
                .map(|(s, _)| s.function.clone())
                .collect(),
            format!(
                "{} leak suspects among {} stacks (false discovery rate {}%), by the test \
                 /debug/pprof/leaks runs.",
                found.suspects.len(),
                found.stacks,
                options.fdr * 100.0
            ),
        ),
        Err(why) => (Vec::new(), format!("No leak test yet: {why}.")),
    };
    let history = match leak_history::series(PAGE_HISTORY_SITES) {
        None => Err(format!(
            "The leak history holds no snapshot yet (one every leak_interval). {verdict}"
        )),
        Some((times, sites)) => Ok(History {
            note: format!(
                "{} snapshots of the in-process leak history over {:.1} s, the largest user \
                 frames now. {verdict}",
                times.len(),
                times.last().copied().unwrap_or(0.0)
            ),
            times,
            series: sites
                .into_iter()
                .map(|(name, bytes)| Series {
                    suspect: suspects.contains(&name),
                    name,
                    bytes,
                })
                .collect(),
        }),
    };
    let program = std::env::args().next().unwrap_or_default();
    let growth = since.and_then(live_growth);
    let page = Page {
        title: format!("Heap of {program} (pid {}) at {when}", std::process::id()),
        source: Source::Live {
            pid: std::process::id(),
        },
        total: charged.total,
        sites: charged.sites,
        folded: charged.folded,
        allocator,
        history,
        scopes,
        growth,
        moments: moments(),
    };
    Response::ok(
        "text/html; charset=utf-8",
        jeprof_page::render(&page).into_bytes(),
    )
}

/// `/debug/pprof/allocator`: the allocator's figures now and their reading, the text
/// `jeprof-compat report --allocator` prints after its table for a dump taken now.
fn allocator() -> Response {
    Response::ok(
        "text/plain; charset=utf-8",
        report::allocator_text().into_bytes(),
    )
}

/// `/debug/pprof/leaks`: [`crate::leak_suspects`] as the table `jeprof-compat leaks` prints (its
/// columns, rates per hour, one stack a row named by its user frame), or with `format=json` the
/// same as JSON (`jeprof-compat leaks --json`'s keys, with `stack` added). 503 with the reason
/// while the history is too short or off.
fn leaks(query: &str) -> Response {
    let mut json = false;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "format" {
            json = match &*value {
                "json" => true,
                "text" => false,
                _ => {
                    return Response::error(
                        400,
                        format_args!("`format={value}`: expected text or json"),
                    )
                }
            };
        }
    }
    init::ensure_init();
    leak_history::ensure_recorder();
    let options = jeprof_dumpfmt::leaks::LeakOptions::default();
    match leak_history::find(&options) {
        Err(why) => Response::error(503, why),
        Ok(found) if json => Response::ok(
            "application/json",
            leaks_json(&found, &options).into_bytes(),
        ),
        Ok(found) => Response::ok(
            "text/plain; charset=utf-8",
            leaks_text(&found, &options).into_bytes(),
        ),
    }
}

fn leaks_text(found: &Found, options: &jeprof_dumpfmt::leaks::LeakOptions) -> String {
    use jeprof_dumpfmt::leaks::{human_duration, table_header, table_row};
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Leak suspects: {} of {} stacks (false discovery rate {}%), from {} snapshots over {}; \
         still growing over the last {:.0}% of the history in each of {} steps",
        found.suspects.len(),
        found.stacks,
        options.fdr * 100.0,
        found.snapshots,
        human_duration(found.span),
        options.window * 100.0,
        found.steps,
    );
    if found.suspects.is_empty() {
        out.push_str("No stack's live bytes are still growing.\n");
        return out;
    }
    let _ = writeln!(out, "{}  function", table_header("/h"));
    for (suspect, trend) in &found.suspects {
        let started = jeprof_dumpfmt::labels::rfc3339_utc(suspect.started);
        let _ = writeln!(
            out,
            "{}  {}",
            table_row(trend, 3_600.0, &started),
            suspect.function.replace(['\r', '\n'], " ")
        );
    }
    out
}

fn leaks_json(found: &Found, options: &jeprof_dumpfmt::leaks::LeakOptions) -> String {
    use serde_json::json;
    let suspects: Vec<serde_json::Value> = found
        .suspects
        .iter()
        .map(|(s, _)| {
            json!({
                "function": s.function,
                "stack": s.stack,
                "growth_bytes_per_hour": s.rate * 3_600.0,
                "growth_bytes_per_hour_95": [s.rate_95.0 * 3_600.0, s.rate_95.1 * 3_600.0],
                "live_bytes": s.live_bytes,
                "live_bytes_95": [s.live_bytes_95.0, s.live_bytes_95.1],
                "started": jeprof_dumpfmt::labels::rfc3339_utc(s.started),
                "p_value": s.p_value,
            })
        })
        .collect();
    let mut text = json!({
        "snapshots": found.snapshots,
        "span_seconds": found.span,
        "per": "stack",
        "sites": found.stacks,
        "false_discovery_rate": options.fdr,
        "window": options.window,
        "steps": found.steps,
        "suspects": suspects,
    })
    .to_string();
    text.push('\n');
    text
}

/// `/pprof/heap` for the legacy jeprof: heap_v2 text without symbols (jeprof posts the addresses
/// it needs to `/pprof/symbol`, so only those are symbolized).
fn legacy_heap(params: &Params) -> Response {
    match &params.scope {
        None => heap_v2(&report::snapshot(false).0, false),
        Some(label) => match scopes::scope_profile(label, false) {
            Some(profile) => heap_v2(&profile, false),
            None => unknown_scope(label),
        },
    }
}

/// 404 for `?scope=` naming a label never entered.
fn unknown_scope(label: &str) -> Response {
    Response::error(
        404,
        format_args!("no scope labelled `{label}` has been entered in this process"),
    )
}

/// `POST /pprof/symbol`: the body is `0x<hex>+0x<hex>+...` (jeprof's `FetchSymbols`); the reply
/// one `0x<hex>\t<names>` line per address with a name, the outer function first and the
/// functions inlined into it after, joined by `--` (what jeprof's `ReadSymbols` splits on). The
/// addresses are those jeprof looks up: inside the call instruction, as in a dump's symbol
/// section.
fn symbols(body: &[u8]) -> Response {
    if body.len() > MAX_SYMBOL_BODY {
        return Response::error(
            413,
            format_args!(
                "the body has {} bytes; at most {MAX_SYMBOL_BODY}",
                body.len()
            ),
        );
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Response::error(400, "the body is not text: expected 0x<hex>+0x<hex>+...");
    };
    let mut addresses = Vec::new();
    for word in text.trim().split('+').filter(|w| !w.is_empty()) {
        let hex = word.strip_prefix("0x").unwrap_or(word);
        match u64::from_str_radix(hex, 16) {
            Ok(a) => addresses.push(a),
            Err(_) => {
                let shown: String = word.chars().take(40).collect();
                return Response::error(
                    400,
                    format_args!(
                        "`{shown}` is not a hexadecimal address: expected 0x<hex>+0x<hex>+..."
                    ),
                );
            }
        }
    }
    addresses.sort_unstable();
    addresses.dedup();
    let (table, _cost) = symbolize::symbol_table(&addresses);
    let mut out = String::new();
    for (address, names) in &table.names {
        let joined: Vec<String> = names
            .iter()
            .rev()
            .map(|n| n.replace(['\n', '\r'], " "))
            .collect();
        let _ = writeln!(out, "0x{address:016x}\t{}", joined.join("--"));
    }
    Response::ok("text/plain; charset=utf-8", out.into_bytes())
}

/// `/pprof/cmdline`: the arguments separated by NUL, as Go's `pprof.Cmdline` serves them (jeprof
/// keeps what comes before the first NUL as the program's name).
fn cmdline() -> Response {
    let mut raw = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    while raw.last() == Some(&0) {
        raw.pop();
    }
    Response::ok("text/plain; charset=utf-8", raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jeprof_dumpfmt::{Counts, Estimate};

    fn stack(frames: &[u64], inuse: f64, accum: f64) -> Stack {
        let e = |bytes: f64| Estimate {
            objects: bytes / 64.0,
            bytes,
            ..Estimate::default()
        };
        Stack {
            frames: frames.to_vec(),
            counts: Counts {
                inuse: e(inuse),
                accum: e(accum),
            },
            threads: Vec::new(),
        }
    }

    #[test]
    fn delta_takes_alloc_from_the_window_and_inuse_from_now() {
        let mut now = Profile::new(4096);
        // Live now and allocated long ago; live now and allocated in the window too.
        now.stacks = vec![stack(&[1, 2], 100.0, 9000.0), stack(&[3], 50.0, 800.0)];
        let mut window = Profile::new(4096);
        // Allocated in the window: one stack live now, one all freed since.
        window.stacks = vec![stack(&[3], 40.0, 300.0), stack(&[4], 0.0, 200.0)];
        let merged = window_with_current_inuse(&window, now);
        let find = |f: &[u64]| merged.stacks.iter().find(|s| s.frames == f).unwrap();
        assert_eq!(find(&[1, 2]).counts.inuse.bytes, 100.0);
        assert_eq!(find(&[1, 2]).counts.accum.bytes, 0.0);
        assert_eq!(find(&[3]).counts.inuse.bytes, 50.0);
        assert_eq!(find(&[3]).counts.accum.bytes, 300.0);
        assert_eq!(find(&[4]).counts.inuse.bytes, 0.0);
        assert_eq!(find(&[4]).counts.accum.bytes, 200.0);
        assert_eq!(merged.stacks.len(), 3);
    }

    #[test]
    fn go_parameters_are_checked_and_unknown_ones_ignored() {
        let p = Params::parse("seconds=30&debug=1&gc=1&extra=whatever").unwrap();
        assert_eq!((p.seconds, p.debug), (Some(30), 1));
        let p = Params::parse("").unwrap();
        assert_eq!((p.seconds, p.debug), (None, 0));
        let p = Params::parse("scope=tenant%2042&debug=1").unwrap();
        assert_eq!(p.scope.as_deref(), Some("tenant 42"));
        for bad in [
            "seconds=",
            "seconds=1.5",
            "seconds=0",
            "seconds=301",
            "debug=x",
            "gc=-1",
            "scope=a&seconds=5",
        ] {
            assert!(Params::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn scope_queries_serve_an_entered_scope_and_refuse_unknown_ones_and_windows() {
        {
            let _guard = Guard::enter();
            crate::parts::scopes::intern("http-unit-scope");
        }
        let text = handle(&Request::get(
            "/debug/pprof/heap?scope=http-unit-scope&debug=1",
        ));
        assert_eq!(text.status, 200);
        let body = String::from_utf8(text.body).unwrap();
        assert!(body.contains("# shim_scope: http-unit-scope"), "{body}");
        assert_eq!(
            handle(&Request::get("/pprof/heap?scope=http-unit-scope")).status,
            200
        );
        for (target, status) in [
            ("/debug/pprof/heap?scope=never-entered", 404),
            ("/pprof/heap?scope=never-entered", 404),
            ("/debug/pprof/heap?scope=http-unit-scope&seconds=1", 400),
            ("/debug/pprof/peak?scope=http-unit-scope", 400),
        ] {
            assert_eq!(handle(&Request::get(target)).status, status, "{target}");
        }
    }

    #[test]
    fn routing_refuses_unknown_paths_and_methods() {
        assert_eq!(handle(&Request::get("/debug/pprof/profile")).status, 404);
        assert_eq!(handle(&Request::get("/pprof/heap/")).status, 404);
        let post = Request {
            method: "POST",
            ..Request::get("/pprof/cmdline")
        };
        assert_eq!(handle(&post).status, 405);
        let symbol = handle(&Request::get("/pprof/symbol"));
        assert_eq!(
            (symbol.status, &symbol.body[..]),
            (200, &b"num_symbols: 1\n"[..])
        );
    }

    #[test]
    fn cmdline_has_no_trailing_nul() {
        let r = handle(&Request::get("/pprof/cmdline"));
        assert_eq!(r.status, 200);
        assert!(!r.body.is_empty() && r.body.last() != Some(&0));
        let argv0 = std::env::args().next().unwrap();
        assert!(r.body.starts_with(argv0.as_bytes()));
    }

    #[test]
    fn symbol_bodies_are_parsed_as_jeprof_writes_them() {
        let r = symbols(b"");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(symbols(b"0x12+junk").status, 400);
        assert_eq!(symbols(&[0xff, 0xfe]).status, 400);
        assert_eq!(symbols(&vec![b'+'; MAX_SYMBOL_BODY + 1]).status, 413);
        // Addresses no object maps have no name, and get no line.
        let r = symbols(b"0x10+0x20\n");
        assert_eq!((r.status, r.body.len()), (200, 0));
    }
}
