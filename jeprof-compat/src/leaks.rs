//! Leak suspects in one process's series of dumps (`jeprof-compat leaks`): the sites whose live
//! bytes are still growing, found by [`jeprof_dumpfmt::leaks`]'s test with the false discovery
//! rate held over all sites, each with its growth rate, live bytes, when the rise began and, given
//! a limit, when the process would reach it.
//!
//! A *site* is a stack's user frame (the function a report charges flat to, under the report's
//! attribution) or, per stack, the stack's shown functions. Dumps are ordered by their `time`
//! label, or when some have none by the sequence number of jemalloc's file names
//! (`jeprof.779.10.i10.heap` after `jeprof.779.2.i2.heap`), else by modification time, else by
//! name ([`jeprof_dumpfmt::series::order`]); without time labels the series is a sequence of steps
//! and rates are per dump. The summary says which order was used.
//!
//! The *exit dump* (kind `f` by its name, `prof_final`'s; or a last dump holding less than
//! [`EXIT_DROP`] of the process's live bytes at the dump before) is the process letting go at
//! shutdown, not a step of its life: its figures are shown but the test decides by the dumps
//! before it, so what the process freed at exit hides no leak the series shows. Setting it aside
//! depends on its name or on the process's total, not on any site's figures, and the test over the
//! dumps before it is the same test over a shorter series: its level and the false discovery rate
//! hold as for any series. The summary says which dumps decided.
//!
//! Reading is two passes: every dump is read once, one stack at a time, for its labels (which also
//! checks every file before any work); then at most [`LeakOptions::points`] dumps spread evenly
//! over the series' time span are resolved, and a site's series is one [`Point`] per dump read.
//! The test compares dumps at a few checkpoints with every dump after them, so the dumps left out
//! between those read change little but the cost: memory is `sites × points × 40` bytes whatever
//! the number of dumps.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

pub use jeprof_dumpfmt::leaks::human_bytes;
use jeprof_dumpfmt::leaks::{self as test, human_duration, Plan, Point, Trend};
use jeprof_dumpfmt::series::{Process, SeriesOrder};
use rayon::prelude::*;

use crate::error::Error;
use crate::input::{series_keys_checked, ReadPolicy};
use crate::named_input::load;
use crate::report::ReportOptions;
use crate::report::{frame_functions, shown_frames};
use crate::symbolize::{ResolvedProfile, SymbolizeOptions};

/// What `leaks` looks for, and how.
#[derive(Debug, Clone)]
pub struct LeakOptions {
    /// The test's window, steps and false discovery rate.
    pub test: test::LeakOptions,
    /// A site per stack rather than per user frame.
    pub per_stack: bool,
    /// At most this many dumps are resolved (at least 4).
    pub points: usize,
    /// The process's heap limit, for the projected time until it is reached.
    pub limit: Option<f64>,
    /// How stacks are charged ([`ReportOptions::attribution`], skip rules, `--focus`).
    pub report: ReportOptions,
}

impl Default for LeakOptions {
    fn default() -> LeakOptions {
        LeakOptions {
            test: test::LeakOptions::default(),
            per_stack: false,
            points: 64,
            limit: None,
            report: ReportOptions {
                attribution: crate::attribution::Attribution::user_code(),
                ..ReportOptions::default()
            },
        }
    }
}

/// One dump of the series: where it is and when it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesDump {
    /// The file.
    pub path: PathBuf,
    /// Its `time` label in microseconds since 1970, if it has one.
    pub time: Option<i64>,
    /// Named as the dump written at exit (kind `f`, `<prefix>.<pid>.<seq>.f.heap`).
    pub exit: bool,
}

/// A site's series and its trend.
#[derive(Debug, Clone)]
pub struct Site {
    /// The user frame, or the stack (`root;…;leaf`) per stack.
    pub name: String,
    /// Live bytes in each dump read (the exit dump's included).
    pub bytes: Vec<f64>,
    /// The test's verdict and the figures.
    pub trend: Trend,
    /// Found by Benjamini–Hochberg at the chosen rate.
    pub suspect: bool,
}

/// What `leaks` found.
#[derive(Debug, Clone)]
pub struct LeakReport {
    /// The dumps read (a selection of [`LeakReport::series`]), in order.
    pub read: Vec<SeriesDump>,
    /// Every dump of the series, in order.
    pub series: Vec<SeriesDump>,
    /// Whether the times are the dumps' labels (else steps: dump 0, 1, …).
    pub timed: bool,
    /// How the series was ordered.
    pub order: SeriesOrder,
    /// How many of the dumps read (the first ones) the test decided by: all but the exit dump.
    pub decided: usize,
    /// The last dump read, when it is the exit dump: shown, not tested (unless too few dumps come
    /// before it).
    pub exit: Option<ExitDump>,
    /// The times of the dumps read, in seconds from the first (steps when untimed).
    pub times: Vec<f64>,
    /// The steps the test used.
    pub steps: usize,
    /// The process's live bytes in the last dump tested (every stack, allocator frames
    /// included).
    pub total_now: f64,
    /// Every site seen, suspects first (by rate, descending), then by live bytes now.
    pub sites: Vec<Site>,
    /// The options.
    pub options: LeakOptions,
}

impl LeakReport {
    /// The suspects, fastest growing first.
    pub fn suspects(&self) -> impl Iterator<Item = &Site> {
        self.sites.iter().filter(|s| s.suspect)
    }
}

/// One field of a [`Process`], when known.
type ProcessField = fn(&Process) -> Option<&str>;

/// Reads every dump for its labels (which checks every file before any work) and orders the
/// series ([`jeprof_dumpfmt::series::order`]: by `time` label, else by the sequence number of
/// jemalloc's file names, else by modification time, else by name). The dumps must come from one
/// process: dumps whose `pid` or `hostname` labels (or, without labels, the pids of their
/// jemalloc names) differ are an error.
pub fn order_series(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<(Vec<SeriesDump>, SeriesOrder), Error> {
    let keys = series_keys_checked(paths, policy)?;
    let fields: [(&str, ProcessField); 2] = [
        ("pid", |p| Some(p.pid.as_str())),
        ("hostname", |p| p.host.as_deref()),
    ];
    for (key, field) in fields {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for k in &keys {
            if let Some(v) = k.process.as_ref().and_then(field) {
                if !seen.iter().any(|(s, _)| *s == v) {
                    seen.push((v, &k.path));
                }
            }
        }
        if seen.len() > 1 {
            return Err(Error::Series(format!(
                "the dumps come from more than one process: {key} is {:?} in {} and {:?} \
                 in {} (by labels, or the pid in jemalloc's file name); leaks reads one \
                 process's series (a fleet's: the SQL view leak_trend over export's rows)",
                seen[0].0, seen[0].1, seen[1].0, seen[1].1
            )));
        }
    }
    let (index, order) = jeprof_dumpfmt::series::order(&keys);
    let series = index
        .into_iter()
        .map(|i| SeriesDump {
            path: paths[i].clone(),
            time: keys[i].time,
            exit: keys[i].name.as_ref().is_some_and(|n| n.is_exit()),
        })
        .collect();
    Ok((series, order))
}

/// At most `points` indexes of `times` (ascending), spread evenly over their span: for each of
/// `points` evenly spaced moments the first dump at or after it, the first and last always.
pub fn spread(times: &[f64], points: usize) -> Vec<usize> {
    if times.len() <= points {
        return (0..times.len()).collect();
    }
    let (first, last) = (times[0], times[times.len() - 1]);
    let mut chosen: Vec<usize> = (0..points)
        .map(|k| {
            let at = first + (last - first) * k as f64 / (points - 1) as f64;
            times.partition_point(|&t| t < at).min(times.len() - 1)
        })
        .collect();
    chosen.push(times.len() - 1);
    chosen.dedup();
    chosen
}

/// A series' last dump set aside as its exit dump (module docs): shown, not tested.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitDump {
    /// The file.
    pub path: PathBuf,
    /// How it was known: its name, or the fall of the process's live bytes.
    pub why: String,
    /// Tested after all: too few dumps before it for the test.
    pub tested: bool,
}

/// A last dump whose process holds less than this fraction of what it held at the dump before is
/// the process letting go at shutdown, not a step of its series.
pub const EXIT_DROP: f64 = 0.5;

/// Finds the leak suspects of one process's series of dump files (module docs).
pub fn find_leaks(
    paths: &[PathBuf],
    symbolize: &SymbolizeOptions,
    options: &LeakOptions,
    policy: &ReadPolicy<'_>,
) -> Result<LeakReport, Error> {
    options
        .test
        .validate()
        .map_err(|e| Error::Series(e.to_string()))?;
    if options.points < 4 {
        return Err(Error::Series(format!(
            "--points must be at least 4, got {}",
            options.points
        )));
    }
    let (series, order) = order_series(paths, policy)?;
    let timed = order.is_timed();
    let all_times: Vec<f64> = match series.first().and_then(|d| d.time) {
        Some(t0) if timed => series
            .iter()
            .map(|d| (d.time.unwrap_or(t0) - t0) as f64 / 1e6)
            .collect(),
        _ => (0..series.len()).map(|i| i as f64).collect(),
    };
    let chosen = spread(&all_times, options.points);
    let times: Vec<f64> = chosen.iter().map(|&i| all_times[i]).collect();
    let read: Vec<SeriesDump> = chosen.iter().map(|&i| series[i].clone()).collect();

    // One dump resolved at a time (in parallel), reduced to its sites' points at once.
    let per_dump: Vec<(HashMap<String, Point>, f64)> = read
        .par_iter()
        .map(|d| {
            let profile = load(&d.path, symbolize, policy)?;
            Ok(site_points(&profile, options))
        })
        .collect::<Result<_, Error>>()?;
    let totals: Vec<f64> = per_dump.iter().map(|(_, total)| *total).collect();
    let exit = exit_dump(&read, &totals);
    let (plan, decided) = plan_without_exit(&times, exit.is_some(), &series, order, options)?;
    let exit = exit.map(|e| ExitDump {
        tested: decided == read.len(),
        ..e
    });
    let total_now = totals[decided - 1];
    let mut by_site: HashMap<String, Vec<Point>> = HashMap::new();
    for (i, (points, _)) in per_dump.into_iter().enumerate() {
        for (name, point) in points {
            by_site
                .entry(name)
                .or_insert_with(|| vec![Point::default(); read.len()])[i] = point;
        }
    }
    let mut sites: Vec<Site> = by_site
        .into_iter()
        .map(|(name, points)| Site {
            trend: test::trend(&plan, &points[..decided]),
            bytes: points.iter().map(|p| p.bytes).collect(),
            name,
            suspect: false,
        })
        .collect();
    mark_suspects(&mut sites, options.test.fdr);
    Ok(LeakReport {
        read,
        series,
        timed,
        order,
        times,
        decided,
        exit,
        steps: plan.steps(),
        total_now,
        sites,
        options: options.clone(),
    })
}

/// The last dump read, when it is the exit dump: named so (kind `f`), or holding less than
/// [`EXIT_DROP`] of the process's live bytes at the dump before it.
fn exit_dump(read: &[SeriesDump], totals: &[f64]) -> Option<ExitDump> {
    let last = read.last()?;
    let why = if last.exit {
        "the exit dump by its name (kind f)".to_string()
    } else {
        let [.., before, now] = totals else {
            return None;
        };
        if *now >= EXIT_DROP * before {
            return None;
        }
        format!(
            "taken as the exit dump: the process's live bytes fell from {} to {} at the \
             series' end",
            human_bytes(*before),
            human_bytes(*now)
        )
    };
    Some(ExitDump {
        path: last.path.clone(),
        why,
        tested: false,
    })
}

/// The test's plan over the dumps read but the exit dump, and how many dumps it decides by: all
/// of them when there is no exit dump, or when too few are left before it for the test.
fn plan_without_exit(
    times: &[f64],
    exit: bool,
    series: &[SeriesDump],
    order: SeriesOrder,
    options: &LeakOptions,
) -> Result<(Plan, usize), Error> {
    if exit {
        if let Ok(plan) = Plan::new(&times[..times.len() - 1], &options.test) {
            return Ok((plan, times.len() - 1));
        }
    }
    let plan = Plan::new(times, &options.test).map_err(|e| {
        Error::Series(format!(
            "{} dumps ({}): {e}",
            series.len(),
            order.describe()
        ))
    })?;
    Ok((plan, times.len()))
}

/// Marks the suspects (Benjamini–Hochberg at `fdr`) and sorts: suspects first by rate, then the
/// rest by live bytes now.
fn mark_suspects(sites: &mut [Site], fdr: f64) {
    let p_values: Vec<f64> = sites.iter().map(|s| s.trend.p_value).collect();
    for (site, found) in sites
        .iter_mut()
        .zip(test::benjamini_hochberg(&p_values, fdr))
    {
        site.suspect = found;
    }
    sites.sort_by(|a, b| {
        b.suspect
            .cmp(&a.suspect)
            .then_with(|| {
                if a.suspect {
                    b.trend.rate.total_cmp(&a.trend.rate)
                } else {
                    b.trend.live.total_cmp(&a.trend.live)
                }
            })
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// A dump's sites and their points, and the dump's live total (every stack).
///
/// A stack's entries are added up before its sampled counts are derived (one point per distinct
/// stack, as `export` writes one row per stack): the writer may spread one stack's estimate over
/// several entries of different average sizes to carry it exactly in jeprof's integers, and the
/// counts of those entries are an encoding, not the stack's samples.
fn site_points(profile: &ResolvedProfile, options: &LeakOptions) -> (HashMap<String, Point>, f64) {
    let report = &options.report;
    let accumulates = profile.stacks.iter().any(|s| s.counts.accum.objects > 0.0);
    let mut stacks: HashMap<Vec<u64>, (usize, jeprof_dumpfmt::Counts)> = HashMap::new();
    let mut total = 0.0;
    for (i, stack) in profile.stacks.iter().enumerate() {
        total += stack.counts.inuse.bytes;
        let key: Vec<u64> = stack.frames.iter().map(|f| f.key).collect();
        stacks
            .entry(key)
            .or_insert((i, jeprof_dumpfmt::Counts::default()))
            .1
            .add(&stack.counts);
    }
    let mut sites: HashMap<String, Point> = HashMap::new();
    for (first, counts) in stacks.into_values() {
        let stack = &profile.stacks[first];
        let Some(frames) = shown_frames(&stack.frames, report) else {
            continue;
        };
        let functions: Vec<String> = frames
            .iter()
            .flat_map(|f| frame_functions(f, report))
            .collect();
        let attribution = &report.attribution;
        let cut = attribution.cut(
            functions.len(),
            |i| attribution.hides(&functions[i]),
            |i| attribution.shows_from(&functions[i]),
        );
        if cut.shown == 0 {
            continue;
        }
        let name = if options.per_stack {
            let mut shown: Vec<&str> = functions[..cut.shown].iter().map(String::as_str).collect();
            shown.reverse();
            shown.join(";")
        } else {
            functions[cut.flat.min(cut.shown - 1)].clone()
        };
        let point = Point::of_counts(&counts, profile.sample_period, accumulates);
        sites.entry(name).or_default().add(&point);
    }
    (sites, total)
}

impl LeakReport {
    /// Rates are per hour when timed, else per dump.
    fn rate_unit(&self) -> (f64, &'static str) {
        if self.timed {
            (3_600.0, "/h")
        } else {
            (1.0, "/dump")
        }
    }

    /// When the rise began, as the table and JSON give it: an RFC 3339 time, or `dump N`.
    fn started(&self, site: &Site) -> String {
        let index = self
            .times
            .iter()
            .position(|&t| t == site.trend.started)
            .unwrap_or(0);
        match self.read[index].time {
            Some(micros) if self.timed => jeprof_dumpfmt::labels::rfc3339_utc(
                std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros.max(0) as u64),
            ),
            _ => format!("dump {}", self.position_in_series(index)),
        }
    }

    /// The position in the whole series of the `index`th dump read.
    fn position_in_series(&self, index: usize) -> usize {
        let path = &self.read[index].path;
        self.series
            .iter()
            .position(|d| &d.path == path)
            .unwrap_or(0)
    }

    /// The time (or steps) from the last dump until the process reaches `limit` at `site`'s rate.
    fn time_to_limit(&self, site: &Site) -> Option<(f64, f64, Option<f64>)> {
        site.trend.time_to(self.total_now, self.options.limit?)
    }

    /// The table `leaks` prints.
    pub fn write_text(&self, mut out: impl io::Write) -> io::Result<()> {
        let (scale, unit) = self.rate_unit();
        let suspects: Vec<&Site> = self.suspects().collect();
        let span = self.times.last().copied().unwrap_or(0.0);
        let over = if self.timed {
            format!("over {}", human_duration(span))
        } else {
            self.order.describe().to_string()
        };
        writeln!(
            out,
            "Leak suspects: {} of {} {} (false discovery rate {}%), from {} of {} dumps {over}; \
             still growing over the last {:.0}% of the series in each of {} steps",
            suspects.len(),
            self.sites.len(),
            if self.options.per_stack {
                "stacks"
            } else {
                "functions"
            },
            self.options.test.fdr * 100.0,
            self.read.len(),
            self.series.len(),
            self.options.test.window * 100.0,
            self.steps,
        )?;
        writeln!(out, "{}", self.decided_note())?;
        if suspects.is_empty() {
            writeln!(out, "No site's live bytes are still growing.")?;
            return Ok(());
        }
        let limit = self.options.limit;
        let mut header = test::table_header(unit);
        if let Some(limit) = limit {
            let _ = write!(
                header,
                "  {:>28}",
                format!("{} reached in", human_bytes(limit))
            );
        }
        writeln!(out, "{header}  {}", self.site_word())?;
        for site in suspects {
            let mut line = test::table_row(&site.trend, scale, &self.started(site));
            if limit.is_some() {
                let when = match self.time_to_limit(site) {
                    Some((mid, soon, late)) => {
                        let show = |s: f64| {
                            if self.timed {
                                human_duration(s)
                            } else {
                                format!("{s:.0} dumps")
                            }
                        };
                        format!(
                            "{} [{}, {}]",
                            show(mid),
                            show(soon),
                            late.map_or("never".into(), show)
                        )
                    }
                    None => "never".into(),
                };
                let _ = write!(line, "  {when:>28}");
            }
            writeln!(out, "{line}  {}", site.name)?;
        }
        Ok(())
    }

    /// Which dumps decided: the first and last tested, and the exit dump set aside, if any.
    pub fn decided_note(&self) -> String {
        let name = |p: &std::path::Path| {
            p.file_name()
                .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
        };
        let (first, last) = (&self.read[0], &self.read[self.decided - 1]);
        let mut note = format!(
            "Decided by the {} dumps read from {} (dump {}) to {} (dump {})",
            self.decided,
            name(&first.path),
            self.position_in_series(0),
            name(&last.path),
            self.position_in_series(self.decided - 1),
        );
        match &self.exit {
            Some(exit) if exit.tested => {
                let _ = write!(
                    note,
                    "; the last, {}, is {}, but too few dumps come before it for the test \
                     without it: it was tested, and what the process freed at exit can hide a \
                     leak.",
                    name(&exit.path),
                    exit.why
                );
            }
            Some(exit) => {
                let _ = write!(
                    note,
                    "; the last, {}, is {}: shown, not tested, so what the process freed at \
                     exit hides no leak the series shows.",
                    name(&exit.path),
                    exit.why
                );
            }
            None => note.push('.'),
        }
        note
    }

    fn site_word(&self) -> &'static str {
        if self.options.per_stack {
            "stack"
        } else {
            "function"
        }
    }

    /// The report as JSON: the series, the options and a `suspects` array, each entry with its
    /// `function` (or `stack`), rate, live bytes, start, p-value and, with a limit, the time to it.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let (scale, unit) = self.rate_unit();
        let per_hour = unit == "/h";
        let suspects: Vec<serde_json::Value> = self
            .suspects()
            .map(|site| {
                let t = &site.trend;
                let (lo, hi) =
                    jeprof_dumpfmt::math::confidence_interval_95(t.live, t.live_variance);
                let mut entry = json!({
                    self.site_word(): site.name,
                    "live_bytes": t.live,
                    "live_bytes_95": [lo, hi],
                    "started": self.started(site),
                    "p_value": t.p_value,
                });
                let rate_key = if per_hour {
                    "growth_bytes_per_hour"
                } else {
                    "growth_bytes_per_dump"
                };
                entry[rate_key] = json!(t.rate * scale);
                entry[format!("{rate_key}_95")] = json!([t.rate_low * scale, t.rate_high * scale]);
                if let Some((mid, soon, late)) = self.time_to_limit(site) {
                    let (div, key) = if per_hour {
                        (3_600.0, "hours_to_limit")
                    } else {
                        (1.0, "dumps_to_limit")
                    };
                    entry[key] = json!(mid / div);
                    entry[format!("{key}_95")] = json!([soon / div, late.map(|l| l / div)]);
                }
                entry
            })
            .collect();
        json!({
            "dumps": self.series.len(),
            "dumps_read": self.read.len(),
            "timed": self.timed,
            "order": self.order.describe(),
            "decided_by": {
                "dumps": self.decided,
                "first": self.read[0].path.display().to_string(),
                "last": self.read[self.decided - 1].path.display().to_string(),
            },
            "exit_dump": self.exit.as_ref().map(|e| json!({
                "path": e.path.display().to_string(),
                "why": e.why,
                "tested": e.tested,
            })),
            "span_seconds": if self.timed { self.times.last().copied() } else { None },
            "per": self.site_word(),
            "sites": self.sites.len(),
            "false_discovery_rate": self.options.test.fdr,
            "window": self.options.test.window,
            "steps": self.steps,
            "live_bytes_now": self.total_now,
            "limit_bytes": self.options.limit,
            "suspects": suspects,
        })
    }

    /// Live bytes over time of the `top` sites with the most live bytes now, and every suspect,
    /// as an SVG line chart; suspects are drawn thick, in red shades, and marked in the legend.
    pub fn write_svg(&self, top: usize, out: &mut String) -> Result<(), Error> {
        use plotters::prelude::*;
        let failed = |e: &dyn std::fmt::Display| Error::Series(format!("drawing the chart: {e}"));
        let mut shown: Vec<&Site> = self.suspects().collect();
        let mut others: Vec<&Site> = self.sites.iter().filter(|s| !s.suspect).collect();
        others.sort_by(|a, b| b.trend.live.total_cmp(&a.trend.live));
        shown.extend(others.into_iter().take(top));
        let x_scale = if self.timed { 3_600.0 } else { 1.0 };
        let xs: Vec<f64> = self.times.iter().map(|t| t / x_scale).collect();
        let x_max = xs.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
        let y_max = shown
            .iter()
            .flat_map(|s| s.bytes.iter())
            .fold(0.0f64, |m, &b| m.max(b / 1e6))
            .max(1e-3)
            * 1.05;
        {
            let root = SVGBackend::with_string(out, (1000, 600)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| failed(&e))?;
            let mut chart = ChartBuilder::on(&root)
                .caption("Live bytes by site (suspects thick)", ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x_max, 0.0..y_max)
                .map_err(|e| failed(&e))?;
            chart
                .configure_mesh()
                .x_desc(if self.timed {
                    "hours since the first dump"
                } else {
                    "dump"
                })
                .y_desc("live MB")
                .draw()
                .map_err(|e| failed(&e))?;
            for (i, site) in shown.iter().enumerate() {
                let color = if site.suspect {
                    RGBColor(200, (40 * i % 160) as u8, 30)
                } else {
                    let (r, g, b) = Palette99::pick(i).rgb();
                    RGBColor(r, g, b)
                };
                let width = if site.suspect { 3 } else { 1 };
                let points: Vec<(f64, f64)> = xs
                    .iter()
                    .zip(&site.bytes)
                    .map(|(&x, &b)| (x, b / 1e6))
                    .collect();
                let mut label: String = site.name.chars().take(70).collect();
                if site.suspect {
                    label.insert_str(0, "suspect: ");
                }
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        points,
                        color.stroke_width(width),
                    )))
                    .map_err(|e| failed(&e))?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(width))
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| failed(&e))?;
            root.present().map_err(|e| failed(&e))?;
        }
        Ok(())
    }
}
