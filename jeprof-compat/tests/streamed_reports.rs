//! The text report and the diff that the command line folds from dump files as it reads them
//! (`report::build_files`, `diff::compare_files`) are the ones built from whole resolved profiles
//! (`report::build`, `diff::compare`): the same rows and figures, bit for bit, and the same text,
//! byte for byte, on every fixture and under every option that changes what is counted.

mod common;

use std::path::{Path, PathBuf};

use jeprof_compat::names::{NameStyle, SkipRules};
use jeprof_compat::report::{self, Measure, ReportOptions};
use jeprof_compat::{diff, ReadPolicy, SymbolizeOptions};
use regex::Regex;

/// Dumps reported together, and the program raw ones were written by.
struct Case {
    dumps: Vec<PathBuf>,
    binary: Option<PathBuf>,
    /// Whether the case runs under every option set of [`option_grid`] or only under
    /// [`SPARSE_GRID`]'s: a raw dump of a real program without its program is named from the C
    /// library's debug file each time it is read (about 130 ms), and the full grid read it 1,000
    /// times.
    full_grid: bool,
}

/// Every fifth option set of [`option_grid`]: seven that still take every value of each option
/// (measure, focus, allocator frames, interval with jeprof's names).
const SPARSE_GRID: usize = 5;

/// The option sets a case runs under.
fn grid_of(case: &Case) -> impl Iterator<Item = (SymbolizeOptions, ReportOptions)> {
    let step = if case.full_grid { 1 } else { SPARSE_GRID };
    option_grid().into_iter().step_by(step)
}

/// A symbolized dump naming functions exactly as jeprof prints addresses nothing names (`0x` and
/// 16 digits, and the bare 16 digits a raw dump without its program gets): a report holds those
/// as addresses, and they must still be one function with the spelled-out name. Also an address
/// above `0x7fffffffffffffff` (dropped) and an allocator frame.
const LOOKALIKE_SYMBOLIZED: &str = "--- symbol\nbinary=prog\n\
    0x0000000000001000 0x0000000000002fff\n0x0000000000003fff 0000000000004fff\n\
    0x0000000000005fff malloc\n0xffffffffff000000 kernel_fn\n---\n--- heap\nheap_v2/524288\n\
    @ 0x1000 0x3000 0x6000\n  t*: 1: 300000 [2: 600000]\n\
    @ 0x6000 0x3000 0x7000\n  t*: 2: 700000 [2: 700000]\n\
    @ 0xffffffffff000000 0x2000 0x3000\n  t*: 1: 100000 [1: 100000]\n\
    MAPPED_LIBRARIES:\n";

/// A raw dump whose addresses nothing names, some of them the ones the dump above spells out.
const LOOKALIKE_RAW: &str = "heap_v2/524288\n\
    @ 0x3000 0x5000\n  t*: 1: 300000 [1: 300000]\n\
    @ 0x2fff 0x5000 0x5000\n  t*: 1: 400000 [1: 400000]\n\
    MAPPED_LIBRARIES:\n00400000-00401000 r-xp 00000000 00:00 0 /nonexistent/prog\n";

fn cases(scratch: &Path) -> Vec<Case> {
    let fixtures = common::fixtures();
    let f = |name: &str| fixtures.join(name);
    let real = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/real");
    let lookalike_symbolized = scratch.join("lookalike_symbolized.heap");
    let lookalike_raw = scratch.join("lookalike_raw.heap");
    std::fs::write(&lookalike_symbolized, LOOKALIKE_SYMBOLIZED).expect("write");
    std::fs::write(&lookalike_raw, LOOKALIKE_RAW).expect("write");
    let mut cases = vec![
        Case {
            dumps: vec![f("symbolized.heap")],
            binary: None,
            full_grid: true,
        },
        Case {
            dumps: vec![f("rust.heap")],
            binary: None,
            full_grid: true,
        },
        Case {
            dumps: vec![f("a.heap"), f("b.heap"), f("symbolized.heap")],
            binary: None,
            full_grid: true,
        },
        Case {
            dumps: vec![f("nonpie.heap")],
            binary: Some(f("prog")),
            full_grid: true,
        },
        Case {
            dumps: vec![f("nonpie.heap")],
            binary: None,
            full_grid: true,
        },
        Case {
            dumps: vec![f("pie.heap")],
            binary: Some(f("prog_pie")),
            full_grid: true,
        },
        Case {
            dumps: vec![real.join("capture.raw.heap"), real.join("capture.sym.heap")],
            binary: None,
            full_grid: false,
        },
        Case {
            dumps: vec![lookalike_symbolized.clone(), lookalike_raw.clone()],
            binary: None,
            full_grid: true,
        },
        Case {
            dumps: vec![lookalike_raw, lookalike_symbolized],
            binary: Some(f("prog")),
            full_grid: true,
        },
    ];
    if let Some(real) = common::real_dump() {
        cases.push(Case {
            dumps: vec![real],
            binary: None,
            full_grid: true,
        });
    }
    cases
}

/// Every combination of the options that change what is counted or printed.
fn option_grid() -> Vec<(SymbolizeOptions, ReportOptions)> {
    let mut grid = Vec::new();
    let measures = [
        Measure::InuseSpace,
        Measure::InuseObjects,
        Measure::AllocSpace,
        Measure::AllocObjects,
    ];
    for measure in measures {
        for focus in [None, Some("main|mid_|4fff|^0x0+2fff$|leaf")] {
            for keep_alloc_frames in [false, true] {
                for (interval, jeprof_names) in [(false, false), (true, true)] {
                    let symbolize = SymbolizeOptions {
                        binary: None,
                        style: if jeprof_names {
                            NameStyle::Jeprof
                        } else {
                            NameStyle::Clean
                        },
                        ..SymbolizeOptions::default()
                    };
                    let options = ReportOptions {
                        measure,
                        show_bytes: interval,
                        focus: focus.map(|f| Regex::new(f).expect("regex")),
                        skip: SkipRules {
                            rust_allocator_frames: !keep_alloc_frames,
                            allocator_objects: !keep_alloc_frames,
                        },
                        nodecount: None,
                        interval,
                        ..ReportOptions::default()
                    };
                    grid.push((symbolize, options));
                }
            }
        }
    }
    grid
}

#[test]
fn report_folded_while_reading_is_the_report_of_resolved_profiles_bit_for_bit() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let policy = ReadPolicy::default();
    let mut compared = 0;
    for case in cases(scratch.path()) {
        for (mut symbolize, options) in grid_of(&case) {
            symbolize.binary = case.binary.clone();
            let what = format!("{:?} {:?} {options:?}", case.dumps, case.binary);
            let profiles = jeprof_compat::load_all(&case.dumps, &symbolize, &policy)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = report::build(&profiles, &options);
            let got = report::build_files(&case.dumps, &symbolize, &options, &policy)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.total().to_bits(), want.total.to_bits(), "{what}");
            assert_eq!(
                got.shown_total().to_bits(),
                want.shown_total.to_bits(),
                "{what}"
            );
            let rows: Vec<_> = got.rows().map(|r| r.to_figures()).collect();
            assert_eq!(rows.len(), want.rows.len(), "{what}");
            for (got, want) in rows.iter().zip(&want.rows) {
                assert_eq!(got.name, want.name, "{what}");
                assert_eq!(
                    got.flat.to_bits(),
                    want.flat.to_bits(),
                    "{what}: {}",
                    got.name
                );
                assert_eq!(
                    got.cum.to_bits(),
                    want.cum.to_bits(),
                    "{what}: {}",
                    got.name
                );
                // Variances are kept when they are printed.
                if options.interval {
                    assert_eq!(got.flat_variance, want.flat_variance, "{what}");
                    assert_eq!(got.cum_variance, want.cum_variance, "{what}");
                }
            }
            let mut text = Vec::new();
            got.write_text(&options, &mut text).expect("write");
            assert_eq!(
                String::from_utf8(text).expect("UTF-8"),
                report::format_text(&want, &options),
                "{what}"
            );
            assert_eq!(
                got.prints_perl_overflow(&options),
                report::prints_perl_overflow(&want, &options),
                "{what}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 8 * 32 + 7, "{compared}");
}

#[test]
fn diff_of_files_read_one_stack_at_a_time_is_the_diff_of_their_reports() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let cases = cases(scratch.path());
    let policy = ReadPolicy::default();
    let mut compared = 0;
    // Pairs within a case share its program.
    for case in &cases {
        let pairs: Vec<(&PathBuf, &PathBuf)> = case
            .dumps
            .iter()
            .flat_map(|a| case.dumps.iter().map(move |b| (a, b)))
            .collect();
        for (mut symbolize, options) in grid_of(case) {
            symbolize.binary = case.binary.clone();
            // The reports of whole resolved profiles, the reference, once per dump and options
            // (a pair's two diffs, and every pair a dump is in, read the same one).
            let mut reports = std::collections::HashMap::new();
            for dump in &case.dumps {
                reports.entry(dump).or_insert_with(|| {
                    let profile = jeprof_compat::load(dump, &symbolize, &policy)
                        .unwrap_or_else(|e| panic!("{dump:?} {options:?}: {e}"));
                    report::build(&[profile], &options)
                });
            }
            for &(base, new) in &pairs {
                let (base_report, new_report) = (&reports[base], &reports[new]);
                for cumulative in [false, true] {
                    let what = format!("{base:?} {new:?} cum={cumulative} {options:?}");
                    let want = diff::compare(base_report, new_report, cumulative);
                    let got =
                        diff::compare_files(base, new, cumulative, &symbolize, &options, &policy)
                            .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(got.changes().collect::<Vec<_>>(), want, "{what}");
                    let mut text = Vec::new();
                    got.write(&options, &mut text).expect("write");
                    assert_eq!(
                        String::from_utf8(text).expect("UTF-8"),
                        diff::format(base_report, new_report, &want, &options),
                        "{what}"
                    );
                    assert_eq!(
                        got.prints_perl_overflow(&options),
                        report::prints_perl_overflow(base_report, &options)
                            || report::prints_perl_overflow(new_report, &options),
                        "{what}"
                    );
                    compared += 1;
                }
            }
        }
    }
    assert!(compared >= 100, "{compared}");
}
