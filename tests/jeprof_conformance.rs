//! Conformance against the real jeprof (built from the registry's jemalloc source): on every valid
//! fixture, jeprof's printed `Total` and per-function figures match the expected files (the
//! model's truth), our reader's figures match jeprof's, and our rounding beats jemalloc's.
//!
//! jeprof runs once per (dump, mode), two at a time, and the outputs are shared by the tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use jeprof_conformance::{jeprof, parse_text, perl_d, run, Text};
use jeprof_dumpfmt::encode::{encode_pair, relative_error, Rounding};
use jeprof_dumpfmt::write::HeaderPeriod;
use jeprof_dumpfmt::WriteOptions;
use jeprof_fixtures::expected::{Expected, Program};
use jeprof_fixtures::rules::{figures, function_rows, stack_functions, Mode};

/// Which dump of a fixture a run is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    /// The committed dump (written with `Rounding::Optimal` for synthetic fixtures).
    Committed,
    /// The same model written with jemalloc's plain rounding (`Rounding::Nearest`).
    Nearest,
}

struct Case {
    expected: Expected,
    dump: PathBuf,
    variant: Variant,
    modes: Vec<Mode>,
    /// The period in the dump's `heap_v2/<R>` header (the writer may choose one below R).
    header_period: u64,
}

fn header_period(dump: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(dump).expect("dump");
    text.lines()
        .find_map(|l| l.strip_prefix("heap_v2/"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}: no heap_v2 header", dump.display()))
}

/// What one jeprof run prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `--text` in one of the four integer modes.
    Mode(Mode),
    /// `--text` in the default MB units.
    Megabytes,
    /// `--text --show_bytes --thread='*'`: one table per thread.
    Threads,
}

/// One jeprof run: a case and what to print.
type Job = (usize, Kind);

struct Runs {
    cases: Vec<Case>,
    /// (case index, mode) → parsed `--text` output.
    texts: BTreeMap<(usize, Mode), Text>,
    /// Case index → `--text` output in MB units (default units), for the huge fixture.
    megabytes: BTreeMap<usize, Text>,
    /// Case index → per thread uid, the `Total (t<uid>):` bytes of `--thread='*'`.
    threads: BTreeMap<usize, BTreeMap<u64, f64>>,
}

fn modes_of(e: &Expected) -> Vec<Mode> {
    if e.has_accum() {
        Mode::ALL.to_vec()
    } else {
        vec![Mode::InuseObjects, Mode::InuseBytes]
    }
}

fn args_for(case: &Case, flags: &[&str]) -> Vec<String> {
    let j = jeprof();
    let mut args: Vec<String> = vec!["--text".into()];
    args.extend(flags.iter().map(|s| s.to_string()));
    if case.expected.program == Program::EmptyFile {
        args.push(j.empty_program.display().to_string());
    }
    args.push(case.dump.display().to_string());
    args
}

fn jeprof_stdout(args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&refs);
    assert_eq!(
        out.status, 0,
        "jeprof {args:?} failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

/// The `Total (t<uid>): <n> B` lines of `--thread='*'` output.
fn thread_totals(stdout: &str) -> BTreeMap<u64, f64> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Total (t")?;
            let (uid, rest) = rest.split_once("): ")?;
            let n = rest.split_whitespace().next()?;
            Some((uid.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let j = jeprof();
        let root = jeprof_fixtures::fixtures_dir();
        let mut cases = Vec::new();
        for (json, expected) in jeprof_fixtures::valid_fixtures(&root).expect("fixtures") {
            let mut dump = json.with_file_name(&expected.dump);
            if expected.program == Program::EmptyFile {
                // Without the maps (an empty section), jeprof cannot look up the capture machine's shared libraries
                // on this one (libc would be symbolized from whatever libc is installed here), so
                // every frame prints as its key, whatever machine runs the test.
                let text = std::fs::read(&dump).expect("dump");
                let end = text
                    .windows(18)
                    .position(|w| w == b"\nMAPPED_LIBRARIES:")
                    .map_or(text.len(), |p| p + 1);
                // The section itself stays (empty): a dump without it reads as one that was cut.
                let mut emptied = text[..end].to_vec();
                emptied.extend_from_slice(b"MAPPED_LIBRARIES:\n");
                let copy = j.scratch.join(format!("{}.nomaps.heap", expected.name));
                std::fs::write(&copy, &emptied).expect("scratch copy");
                dump = copy;
            }
            let modes = modes_of(&expected);
            cases.push(Case {
                header_period: header_period(&dump),
                expected,
                dump,
                variant: Variant::Committed,
                modes,
            });
        }
        // The model fixtures again, written with jemalloc's plain rounding.
        for f in jeprof_fixtures::synthetic::all() {
            let Some(profile) = jeprof_fixtures::synthetic::profile_of(&f) else {
                continue;
            };
            let dump = j.scratch.join(format!("{}.nearest.heap", f.expected.name));
            let options = WriteOptions {
                rounding: Rounding::Nearest,
                symbols: true,
                header_period: HeaderPeriod::Sampling,
                ..WriteOptions::default()
            };
            jeprof_dumpfmt::write::write_file(profile, &dump, &options).expect("write");
            let modes = modes_of(&f.expected);
            cases.push(Case {
                header_period: header_period(&dump),
                expected: f.expected,
                dump,
                variant: Variant::Nearest,
                modes,
            });
        }
        let mut jobs: Vec<Job> = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            jobs.extend(c.modes.iter().map(|m| (i, Kind::Mode(*m))));
            if c.variant == Variant::Committed {
                jobs.push((i, Kind::Threads));
                if c.expected.name == "near_u64_max" {
                    jobs.push((i, Kind::Megabytes));
                }
            }
        }
        let jobs = Mutex::new(jobs);
        let results: Mutex<Vec<(Job, String)>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| loop {
                    let Some((i, kind)) = jobs.lock().expect("lock").pop() else {
                        break;
                    };
                    let flags: &[&str] = match kind {
                        Kind::Mode(m) => m.jeprof_flags(),
                        Kind::Megabytes => &["--inuse_space"],
                        Kind::Threads => &["--inuse_space", "--show_bytes", "--thread=*"],
                    };
                    let stdout = jeprof_stdout(&args_for(&cases[i], flags));
                    results.lock().expect("lock").push(((i, kind), stdout));
                });
            }
        });
        let mut texts = BTreeMap::new();
        let mut megabytes = BTreeMap::new();
        let mut threads = BTreeMap::new();
        for ((i, kind), stdout) in results.into_inner().expect("lock") {
            let parse = || {
                parse_text(&stdout).unwrap_or_else(|e| panic!("case {i} {kind:?}: {e}\n{stdout}"))
            };
            match kind {
                Kind::Mode(m) => {
                    texts.insert((i, m), parse());
                }
                Kind::Megabytes => {
                    megabytes.insert(i, parse());
                }
                Kind::Threads => {
                    threads.insert(i, thread_totals(&stdout));
                }
            }
        }
        Runs {
            cases,
            texts,
            megabytes,
            threads,
        }
    })
}

/// The relative error the encoding achieves for stack `i` in `mode`'s pair (what jeprof computes
/// from the dump, before printing), for stacks where we promise no better.
fn encoding_bound(e: &Expected, header: u64, i: usize, mode: Mode, rounding: Rounding) -> f64 {
    let f = &e.stacks[i].figures;
    let (o, b) = if mode.bytes_of_pair() == Mode::InuseBytes {
        (f[0], f[1])
    } else {
        (f[2], f[3])
    };
    let pairs = encode_pair(o, b, header, rounding);
    relative_error(&pairs, o, b, header)
}

/// Absolute tolerance for a figure made of `stacks`: 0.1% of each large stack, the encoding's own
/// bound for the others, at least one unit.
fn tolerance(e: &Expected, header: u64, stacks: &[usize], mode: Mode, rounding: Rounding) -> f64 {
    let mut tol = 0.0;
    for &i in stacks {
        let v = e.stacks[i].figures[mode.index()].abs();
        let rel = if e.is_large(i, mode) {
            1e-3
        } else {
            // A hair above the bound for the floating-point sums jeprof does in another order.
            encoding_bound(e, header, i, mode, rounding) + 1e-9
        };
        tol += rel * v;
    }
    tol.max(1.0)
}

/// `printed` is what Perl prints for a figure jeprof computed as `value` (up to one unit for
/// truncation and summation order): `%d` truncates, wraps from 2^63 and prints -1 from 2^64, except
/// where Perl's integer-preserving arithmetic kept the value an exact integer (`s × 1.0`).
fn printed_as_perl(printed: f64, value: f64) -> bool {
    let near = |a: f64, b: f64| (a - b).abs() <= 1.0 + 1e-12 * b.abs();
    near(printed, perl_d(value)) || (value.abs() >= 9.2e18 && near(printed, value))
}

/// `printed` is what jeprof prints (`%d`, truncated) for a figure within `tol` of `truth`.
fn within(printed: f64, truth: f64, tol: f64) -> bool {
    printed >= perl_d(truth - tol) - 1.0 && printed <= perl_d(truth + tol)
}

#[test]
fn jeprof_is_built_from_the_registry_source() {
    let j = jeprof();
    let out = run(&["--version"]);
    assert!(
        out.stdout.contains(&j.version) || out.stderr.contains(&j.version),
        "jeprof --version does not name {}: {}{}",
        j.version,
        out.stdout,
        out.stderr
    );
}

#[test]
fn jeprof_prints_the_expected_figures_for_every_fixture() {
    let runs = runs();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (ci, case) in runs.cases.iter().enumerate() {
        if case.variant != Variant::Committed {
            continue;
        }
        let e = &case.expected;
        for &mode in &case.modes {
            let text = &runs.texts[&(ci, mode)];
            let k = mode.index();
            let exact = e.exact;
            let check = |what: &str, printed: Option<f64>, truth: f64, stacks: &[usize]| {
                let ok = match printed {
                    None => perl_d(truth) == 0.0 || (exact && truth == 0.0),
                    Some(p) if exact => printed_as_perl(p, truth),
                    Some(p) => within(
                        p,
                        truth,
                        tolerance(e, case.header_period, stacks, mode, Rounding::Optimal),
                    ),
                };
                (!ok).then(|| {
                    format!(
                        "{} {}: {what}: jeprof printed {printed:?}, expected {truth}",
                        e.name,
                        mode.name()
                    )
                })
            };
            let all: Vec<usize> = (0..e.stacks.len()).collect();
            let total = if e.totals[k] == 0.0 && text.total.is_none() {
                None
            } else {
                check("Total", text.total, e.totals[k], &all)
            };
            failures.extend(total);
            for (name, row) in &e.functions {
                let printed = text.rows.get(name);
                if row.cum[k] == 0.0 && printed.is_none() {
                    continue;
                }
                failures.extend(check(
                    &format!("{name} flat"),
                    printed.map(|p| p.0),
                    row.flat[k],
                    &row.flat_stacks,
                ));
                failures.extend(check(
                    &format!("{name} cum"),
                    printed.map(|p| p.1),
                    row.cum[k],
                    &row.cum_stacks,
                ));
                checked += 1;
            }
            for name in text.rows.keys() {
                if !e.functions.contains_key(name) {
                    failures.push(format!(
                        "{} {}: unexpected row {name:?}",
                        e.name,
                        mode.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 50, "only {checked} rows checked");
}

#[test]
fn our_reader_agrees_with_jeprof_on_every_fixture() {
    let runs = runs();
    let mut failures = Vec::new();
    for (ci, case) in runs.cases.iter().enumerate() {
        let profile = jeprof_dumpfmt::read::read_file(&case.dump).expect("valid fixture");
        let symbols = match case.expected.program {
            Program::Symbolized => profile.symbols.as_ref(),
            Program::EmptyFile => None,
        };
        let stacks: Vec<(Vec<String>, [f64; 4])> = profile
            .stacks
            .iter()
            .map(|s| (stack_functions(&s.frames, symbols), figures(&s.counts)))
            .collect();
        let rows = function_rows(&stacks);
        let mut totals = [0.0; 4];
        for (_, f) in &stacks {
            for k in 0..4 {
                totals[k] += f[k];
            }
        }
        for &mode in &case.modes {
            let text = &runs.texts[&(ci, mode)];
            let k = mode.index();
            let agree = |ours: f64, printed: Option<f64>| match printed {
                None => perl_d(ours) == 0.0,
                Some(p) => printed_as_perl(p, ours),
            };
            let tag = format!(
                "{} ({:?}) {}",
                case.expected.name,
                case.variant,
                mode.name()
            );
            if !agree(totals[k], text.total) {
                failures.push(format!(
                    "{tag}: Total: ours {} jeprof {:?}",
                    totals[k], text.total
                ));
            }
            for (name, row) in &rows {
                let printed = text.rows.get(name);
                if row.flat[k] == 0.0 && row.cum[k] == 0.0 && printed.is_none() {
                    continue;
                }
                if !agree(row.flat[k], printed.map(|p| p.0))
                    || !agree(row.cum[k], printed.map(|p| p.1))
                {
                    failures.push(format!(
                        "{tag}: {name}: ours flat {} cum {}, jeprof {printed:?}",
                        row.flat[k], row.cum[k]
                    ));
                }
            }
            for name in text.rows.keys() {
                if !rows.contains_key(name) {
                    failures.push(format!("{tag}: jeprof row {name:?} unknown to our rules"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn per_thread_totals_agree_with_our_reader() {
    let runs = runs();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (ci, printed) in &runs.threads {
        let case = &runs.cases[*ci];
        let profile = jeprof_dumpfmt::read::read_file(&case.dump).expect("valid fixture");
        let mut ours: BTreeMap<u64, f64> = BTreeMap::new();
        for s in &profile.stacks {
            for t in &s.threads {
                *ours.entry(t.thread).or_default() += t.counts.inuse.bytes;
            }
        }
        ours.retain(|_, v| perl_d(*v) != 0.0);
        let uids: std::collections::BTreeSet<u64> =
            ours.keys().chain(printed.keys()).copied().collect();
        for uid in uids {
            let (o, p) = (ours.get(&uid).copied(), printed.get(&uid).copied());
            let ok = matches!((o, p), (Some(o), Some(p)) if printed_as_perl(p, o));
            compared += 1;
            if !ok {
                failures.push(format!(
                    "{} t{uid}: ours {o:?}, jeprof Total (t{uid}) {p:?}",
                    case.expected.name
                ));
            }
        }
    }
    assert!(compared >= 10, "only {compared} thread totals compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn huge_counts_print_as_perl_formats_them_and_megabytes_stay_right() {
    let runs = runs();
    let (ci, case) = runs
        .cases
        .iter()
        .enumerate()
        .find(|(_, c)| c.expected.name == "near_u64_max" && c.variant == Variant::Committed)
        .expect("near_u64_max fixture");
    let mb = &runs.megabytes[&ci];
    let e = &case.expected;
    let total_mb = e.totals[1] / 1_048_576.0;
    let printed = mb.total.expect("a Total line");
    assert!(
        (printed - total_mb).abs() <= 0.05 + 1e-12 * total_mb,
        "Total {printed} MB, expected {total_mb}"
    );
    let bytes = &runs.texts[&(ci, Mode::InuseBytes)];
    assert_eq!(
        bytes.total,
        Some(-1.0),
        "Perl prints -1 for a total above 2^64"
    );
}

#[test]
fn jeprof_prints_nothing_for_the_empty_dump() {
    let runs = runs();
    let (ci, _) = runs
        .cases
        .iter()
        .enumerate()
        .find(|(_, c)| c.expected.name == "empty" && c.variant == Variant::Committed)
        .expect("empty fixture");
    for mode in [Mode::InuseBytes, Mode::InuseObjects] {
        assert_eq!(runs.texts[&(ci, mode)], Text::default());
    }
}

/// Worst relative error of jeprof's printed per-stack figures against the truth, over large
/// stacks that are the only ones charged to their leaf function (so that a flat row is a stack).
fn worst_errors(variant: Variant) -> (f64, String, f64, String, usize) {
    let runs = runs();
    let (mut bytes, mut bytes_at, mut objects, mut objects_at) =
        (0.0, String::new(), 0.0, String::new());
    let mut count = 0;
    for (ci, case) in runs.cases.iter().enumerate() {
        let e = &case.expected;
        if case.variant != variant || e.exact {
            continue;
        }
        for &mode in &case.modes {
            let text = &runs.texts[&(ci, mode)];
            for (i, s) in e.stacks.iter().enumerate() {
                let leaf = &s.functions[0];
                if !e.is_large(i, mode) || e.functions[leaf].flat_stacks != [i] {
                    continue;
                }
                let truth = s.figures[mode.index()];
                let printed = text.rows.get(leaf).map_or(0.0, |r| r.0);
                // jeprof prints integers: an error below one unit is truncation, not rounding.
                let err = ((printed - truth).abs() - 1.0).max(0.0) / truth;
                let at = format!(
                    "{} {} {leaf}: printed {printed}, true {truth:.1}",
                    e.name,
                    mode.name()
                );
                count += 1;
                if mode.is_bytes() && err >= bytes {
                    (bytes, bytes_at) = (err, at);
                } else if !mode.is_bytes() && err >= objects {
                    (objects, objects_at) = (err, at);
                }
            }
        }
    }
    (bytes, bytes_at, objects, objects_at, count)
}

#[test]
fn optimal_rounding_is_within_a_thousandth_on_large_stacks_where_plain_rounding_is_not() {
    let (ob, ob_at, oo, oo_at, n) = worst_errors(Variant::Committed);
    let (nb, nb_at, no, no_at, _) = worst_errors(Variant::Nearest);
    println!(
        "worst relative error of jeprof's printed figures over {n} (large stack, mode) pairs:"
    );
    println!("  Rounding::Optimal  bytes {ob:.3e} ({ob_at})");
    println!("  Rounding::Optimal  objects {oo:.3e} ({oo_at})");
    println!("  Rounding::Nearest  bytes {nb:.3e} ({nb_at})");
    println!("  Rounding::Nearest  objects {no:.3e} ({no_at})");
    assert!(n >= 10, "only {n} large stacks measured");
    assert!(ob <= 1e-3 && oo <= 1e-3, "optimal rounding above 0.1%");
    assert!(
        nb.max(no) > 1e-2,
        "plain rounding was expected to be off by percents somewhere"
    );
}
