//! `report --html`: the page of `jeprof-page` from dumps, one self-contained HTML file.
//!
//! One dump is the moment shown. Several are one process's series (ordered as
//! [`crate::leaks`] orders them: by `time` label, else by the sequence numbers of jemalloc's file
//! names, else by modification time, else by name): the last is the moment shown,
//! and the series gives live bytes over time for the top sites and the leak suspects,
//! [`find_leaks`]'s with its default options. The sites are the text report's, from its own
//! engine ([`report::build_files`]) under the caller's options (attribution, skip rules,
//! `--focus`), in-use bytes and objects; the flame graph is [`report::collapsed_files`]'s; the
//! allocator's figures are `report --allocator`'s ([`report::allocator_files`]); the scopes are
//! `report --by-scope`'s; the resident column, when the dump carries residency figures, is
//! `report --rss`'s. So every figure on the page is one `report` prints for the same dump.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use jeprof_dumpfmt::allocator::AllocatorFigures;
use jeprof_dumpfmt::rss::{ByteEstimate, RssFigures};
use jeprof_page::{Growth, History, Page, Series, Site, Source};

use crate::diff;
use crate::error::Error;
use crate::input::{read_dump, ReadPolicy};
use crate::leaks::{find_leaks, order_series, LeakOptions};
use crate::report::{self, Measure, ReportOptions};
use crate::symbolize::SymbolizeOptions;

/// The page's heading for the dump at `path` with `labels`: its program (label `program`, else
/// the file's name), its pid (label `pid`, else the pid of a jemalloc-style file name) and its
/// moment (label `time`, else the file's modification time, said as such), each left out when
/// nothing gives it.
pub fn heading(labels: &[(String, String)], path: &std::path::Path) -> String {
    use jeprof_dumpfmt::labels::{get, rfc3339_utc};
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut title = match get(labels, "program") {
        Some(program) => format!("Heap of {program}"),
        None => format!("Heap in {file}"),
    };
    let pid = get(labels, "pid")
        .map(str::to_string)
        .or_else(|| jeprof_dumpfmt::series::DumpName::parse(&file).map(|n| n.pid.to_string()));
    if let Some(pid) = pid {
        title.push_str(&format!(" (pid {pid})"));
    }
    match get(labels, "time") {
        Some(time) => title.push_str(&format!(" at {time}")),
        None => {
            if let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) {
                title.push_str(&format!(", file written at {}", rfc3339_utc(modified)));
            }
        }
    }
    title
}

/// The in-use total and the page's sites for the dump `moment`: the text report's rows with a
/// figure, in-use bytes charged with `bytes_options`, their objects, and their resident bytes
/// when the dump has them ([`resident_by_function`]).
fn sites_of(
    moment: &[PathBuf],
    symbolize: &SymbolizeOptions,
    bytes_options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<(jeprof_dumpfmt::Estimate, Vec<Site>), Error> {
    let objects_options = ReportOptions {
        measure: Measure::InuseObjects,
        ..bytes_options.clone()
    };
    let by_bytes = report::build_files(moment, symbolize, bytes_options, policy)?;
    let by_objects = report::build_files(moment, symbolize, &objects_options, policy)?;
    let mut objects: HashMap<String, (f64, f64)> = by_objects
        .rows()
        .map(|r| (r.name.to_string(), (r.flat, r.flat_variance)))
        .collect();
    let resident = match moment.last() {
        Some(last) => resident_by_function(last, symbolize, bytes_options, policy)?,
        None => None,
    };
    let total = jeprof_dumpfmt::Estimate {
        bytes: by_bytes.total(),
        bytes_variance: by_bytes.total_variance(),
        objects: by_objects.total(),
        objects_variance: by_objects.total_variance(),
    };
    let sites = by_bytes
        .rows()
        .filter(|r| r.flat != 0.0 || r.cum != 0.0)
        .map(|r| {
            let name = r.name.to_string();
            let (objects, objects_variance) = objects.remove(&name).unwrap_or_default();
            Site {
                bytes: r.flat,
                bytes_variance: r.flat_variance,
                objects,
                objects_variance,
                cum_bytes: r.cum,
                cum_bytes_variance: r.cum_variance,
                resident: resident
                    .as_ref()
                    .map(|by_name| by_name.get(&name).copied().unwrap_or_default()),
                name,
            }
        })
        .collect();
    Ok((total, sites))
}

/// Per function, the resident bytes `report --rss` charges it (flat, by the same engine and
/// `options` as the page's rows), when the dump at `path` carries residency figures read from
/// the page map; `None` when it carries none or its page map was unreadable (then the page has
/// no resident column).
fn resident_by_function(
    path: &Path,
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Option<HashMap<String, ByteEstimate>>, Error> {
    let profile = read_dump(path, policy)?;
    let figures =
        RssFigures::from_annotations(&profile.annotations).map_err(|e| e.in_file(path))?;
    let Some(figures) = figures.filter(|f| f.pagemap.is_ok()) else {
        return Ok(None);
    };
    // The reconciliation is not drawn: the allocator's figures only feed it.
    let allocator = AllocatorFigures::from_annotations(&profile.annotations).unwrap_or_default();
    let source = path.display().to_string();
    let report = report::rss_profile(profile, figures, allocator, &source, symbolize, options);
    Ok(Some(
        report
            .rows
            .into_iter()
            .map(|r| (r.function, r.resident))
            .collect(),
    ))
}

/// Sites drawn over time besides the suspects: the largest now.
pub const HISTORY_SITES: usize = 8;

/// The page of `paths` (module docs); `options` says how stacks are charged (its measure,
/// units and intervals are the page's own: in-use bytes and objects, with intervals). With
/// `base`, the page shows what grew from that dump to the moment shown ([`growth`]).
pub fn page_files(
    paths: &[PathBuf],
    base: Option<&Path>,
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Page, Error> {
    let (ordered, last) = match paths {
        [] => return Err(Error::Series("no dump given".to_string())),
        [one] => (vec![one.clone()], one.clone()),
        many => {
            let (series, _) = order_series(many, policy)?;
            let ordered: Vec<PathBuf> = series.into_iter().map(|d| d.path).collect();
            let last = ordered[ordered.len() - 1].clone();
            (ordered, last)
        }
    };
    let moment = std::slice::from_ref(&last);
    let bytes_options = ReportOptions {
        measure: Measure::InuseSpace,
        show_bytes: true,
        interval: true,
        nodecount: None,
        sort_by_cum: false,
        ..options.clone()
    };
    let (total, sites) = sites_of(moment, symbolize, &bytes_options, policy)?;
    let folded = report::collapsed_files(moment, symbolize, &bytes_options, policy)?;
    let growth = match base {
        Some(base) => Some(growth(
            base,
            &last,
            &folded,
            symbolize,
            &bytes_options,
            policy,
        )?),
        None => None,
    };
    let allocator = report::allocator_files(moment, policy)
        .map(|r| r.text())
        .map_err(|e| e.to_string());
    let profile = read_dump(&last, policy)?;
    let scopes: Vec<(String, jeprof_dumpfmt::Estimate)> =
        jeprof_dumpfmt::scopes::scope_totals(&profile)
            .into_iter()
            .collect();
    let title = heading(&profile.labels, &last);
    drop(profile);
    let history = if ordered.len() < 2 {
        Err(
            "One dump: give one process's series of dumps (as `jeprof-compat leaks` reads \
             them) for live bytes over time and the leak suspects."
                .to_string(),
        )
    } else {
        history(&ordered, symbolize, options, policy).map_err(|e| e.to_string())
    };
    Ok(Page {
        title,
        source: Source::Dumps(ordered.iter().map(|p| p.display().to_string()).collect()),
        total,
        sites,
        folded,
        allocator,
        history,
        scopes,
        growth,
        moments: Vec::new(),
    })
}

/// What grew from dump `base` to dump `last` (whose folded stacks are `folded_now`): each site's
/// change with `diff`'s interval ([`diff::compare_files`] under the page's charging, in-use
/// bytes), largest change first, and every stack's live bytes then and now for the differential
/// flame graph.
pub fn growth(
    base: &Path,
    last: &Path,
    folded_now: &[(String, f64)],
    symbolize: &SymbolizeOptions,
    bytes_options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<Growth, Error> {
    let compared = diff::compare_files(base, last, false, symbolize, bytes_options, policy)?;
    let changes = compared.changes().collect();
    let then = report::collapsed_files(&[base.to_path_buf()], symbolize, bytes_options, policy)?;
    let mut stacks: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (stack, bytes) in &then {
        stacks.entry(stack).or_default().0 += bytes;
    }
    for (stack, bytes) in folded_now {
        stacks.entry(stack).or_default().1 += bytes;
    }
    let base_labels = read_dump(base, policy)?.labels;
    Ok(Growth {
        base: heading(&base_labels, base),
        folded: stacks
            .into_iter()
            .map(|(stack, (then, now))| (stack.to_string(), then, now))
            .collect(),
        changes,
        note: String::new(),
    })
}

/// The series' live bytes per site and the suspects ([`find_leaks`] with its default test,
/// sites charged under `options`): every suspect and the [`HISTORY_SITES`] largest sites now.
fn history(
    paths: &[PathBuf],
    symbolize: &SymbolizeOptions,
    options: &ReportOptions,
    policy: &ReadPolicy<'_>,
) -> Result<History, Error> {
    let leak_options = LeakOptions {
        report: options.clone(),
        ..LeakOptions::default()
    };
    let found = find_leaks(paths, symbolize, &leak_options, policy)?;
    let suspects = found.suspects().count();
    let mut others: Vec<&crate::leaks::Site> = found.sites.iter().filter(|s| !s.suspect).collect();
    others.sort_by(|a, b| b.trend.live.total_cmp(&a.trend.live));
    let shown = found
        .suspects()
        .chain(others.into_iter().take(HISTORY_SITES));
    let series: Vec<Series> = shown
        .map(|s| Series {
            name: s.name.clone(),
            bytes: s.bytes.clone(),
            suspect: s.suspect,
        })
        .collect();
    let note = format!(
        "{} dumps ({} read), {}; {suspects} leak suspects among {} sites (false discovery rate \
         {}%), as `jeprof-compat leaks` finds them.{} {}",
        found.series.len(),
        found.read.len(),
        found.order.describe(),
        found.sites.len(),
        leak_options.test.fdr * 100.0,
        if found.timed {
            ""
        } else {
            " The axis counts dumps."
        },
        found.decided_note(),
    );
    Ok(History {
        times: found.times.clone(),
        series,
        note,
    })
}
