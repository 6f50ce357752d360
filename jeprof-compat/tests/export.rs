//! `jeprof-compat export`: rows whose plain sums are `merge`'s figures, per function and in total,
//! variances too, over dumps of different periods, builds and processes (ASLR); real jemalloc's
//! and merged dumps; labels from the dump and the command line; the pid and time fallbacks; and
//! no output file at all when a dump does not read; the residency columns, whose sums per function
//! are `report --rss --json`'s figures, null where a dump has none.

mod common;
#[path = "common/rss_dump.rs"]
mod rss_dump;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt64Type};
use arrow_array::{Array, RecordBatch};
use jeprof_compat::attribution::Attribution;
use jeprof_compat::merge;
use jeprof_compat::report::{self, Measure, ReportOptions};
use jeprof_compat::{ReadPolicy, SymbolizeOptions};
use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack, SymbolTable, ThreadCounts, WriteOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// One row read back, the columns the tests look at.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    dump: String,
    pid: Option<i64>,
    time: Option<i64>,
    build_id: Option<String>,
    binary: Option<String>,
    labels: Vec<(String, String)>,
    sample_period: i64,
    thread: Option<i64>,
    frames: Vec<String>,
    locations: Vec<String>,
    addresses: Vec<u64>,
    leaf: Option<String>,
    user_frame: Option<String>,
    /// inuse objects, bytes, alloc objects, bytes, then their variances.
    figures: [f64; 8],
}

fn strings(array: &dyn Array) -> Vec<String> {
    let a = array.as_string::<i32>();
    (0..a.len()).map(|i| a.value(i).to_string()).collect()
}

fn read_rows(path: &Path) -> (Vec<Row>, BTreeMap<String, String>) {
    let file = std::fs::File::open(path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let metadata: BTreeMap<String, String> = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    let mut rows = Vec::new();
    for batch in builder.build().unwrap() {
        rows.extend(batch_rows(&batch.unwrap()));
    }
    (rows, metadata)
}

fn batch_rows(b: &RecordBatch) -> Vec<Row> {
    let col = |name: &str| b.column_by_name(name).unwrap_or_else(|| panic!("{name}"));
    let opt_str = |name: &str, i: usize| {
        let a = col(name).as_string::<i32>();
        a.is_valid(i).then(|| a.value(i).to_string())
    };
    let opt_i64 = |name: &str, i: usize| {
        let a = col(name).as_primitive::<Int64Type>();
        a.is_valid(i).then(|| a.value(i))
    };
    let version = col("schema_version").as_primitive::<Int32Type>();
    let time = col("time").as_primitive::<TimestampMicrosecondType>();
    let labels = col("labels").as_map();
    let frames = col("frames").as_list::<i32>();
    let locations = col("locations").as_list::<i32>();
    let addresses = col("addresses").as_list::<i32>();
    let figure_columns = [
        "inuse_objects",
        "inuse_bytes",
        "alloc_objects",
        "alloc_bytes",
        "inuse_objects_var",
        "inuse_bytes_var",
        "alloc_objects_var",
        "alloc_bytes_var",
    ];
    (0..b.num_rows())
        .map(|i| {
            assert_eq!(version.value(i), 1);
            let entries = labels.value(i);
            let keys = strings(entries.column(0).as_ref());
            let values = strings(entries.column(1).as_ref());
            let mut figures = [0.0; 8];
            for (f, name) in figures.iter_mut().zip(figure_columns) {
                *f = col(name).as_primitive::<Float64Type>().value(i);
            }
            Row {
                dump: opt_str("dump", i).unwrap(),
                pid: opt_i64("pid", i),
                time: time.is_valid(i).then(|| time.value(i)),
                build_id: opt_str("build_id", i),
                binary: opt_str("binary", i),
                labels: keys.into_iter().zip(values).collect(),
                sample_period: opt_i64("sample_period", i).unwrap(),
                thread: opt_i64("thread", i),
                frames: strings(frames.value(i).as_ref()),
                locations: strings(locations.value(i).as_ref()),
                addresses: addresses
                    .value(i)
                    .as_primitive::<UInt64Type>()
                    .values()
                    .to_vec(),
                leaf: opt_str("leaf", i),
                user_frame: opt_str("user_frame", i),
                figures,
            }
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

fn export(args: &[&str], dumps: &[PathBuf], out: &Path) {
    let mut all: Vec<String> = vec!["export".into(), "-o".into(), out.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    all.extend(dumps.iter().map(|p| p.display().to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    common::run_ok(&all);
}

fn function_name(f: u64) -> String {
    match f % 5 {
        // Standard library frames, which the reports pass over when charging flat.
        0 => format!("alloc::raw_vec::RawVec<T>::grow_{f}"),
        1 => format!("<alloc::vec::Vec<T> as core::clone::Clone>::clone_{f}"),
        _ => format!("service::module_{}::method_{f}", f % 7),
    }
}

/// A symbolized dump of `stacks` stacks over 40 functions, at its own address base (its own
/// build) and sample period, with an allocator frame at some leaves and inlined functions.
fn fleet_dump(seed: u64, stacks: usize) -> Profile {
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let period = 1u64 << (12 + next(8));
    let base = 0x5500_0000_0000 + seed * 0x100_0000;
    let mut profile = Profile::new(period);
    let mut names = BTreeMap::new();
    for _ in 0..stacks {
        let depth = 2 + next(6) as usize;
        let functions: Vec<u64> = (0..depth).map(|_| next(40)).collect();
        let frames: Vec<u64> = functions
            .iter()
            .enumerate()
            .map(|(d, &f)| base + f * 0x400 + (d as u64 % 3) * 8 + 1)
            .collect();
        for (k, &a) in frames.iter().enumerate() {
            let f = functions[k];
            let mut here = vec![function_name(f)];
            if f % 11 == 3 {
                // An inlined callee, innermost first.
                here.insert(0, format!("service::inlined_{f}"));
            }
            if k == 0 && f.is_multiple_of(4) {
                here = vec!["malloc".into()];
            }
            names.entry(if k == 0 { a } else { a - 1 }).or_insert(here);
        }
        let size = 8.0 * (1 + next(2048)) as f64;
        let mut counts = Counts::default();
        for _ in 0..1 + next(12) {
            let one = Estimate::of_sample(size, period as f64);
            counts.accum.add(&one);
            if next(3) > 0 {
                counts.inuse.add(&one);
            }
        }
        profile.stacks.push(Stack {
            frames,
            counts,
            threads: vec![ThreadCounts {
                thread: next(3),
                counts,
            }],
        });
    }
    profile.threads = profile.thread_summaries();
    profile.symbols = Some(SymbolTable {
        binary: Some("service".into()),
        names,
        ..SymbolTable::default()
    });
    profile.mapped_libraries = Some(format!(
        "{base:x}-{:x} r-xp 00000000 08:01 7 /usr/bin/service\n",
        base + 0x100_0000
    ));
    profile
}

/// Per (measure, function): a figure and its variance; and per measure, the total and its
/// variance. Measures in the order of the figure columns.
type Figures = (BTreeMap<(usize, String), (f64, f64)>, [(f64, f64); 4]);

/// What `merge` computes for `paths`: per function charged flat by the reports' default
/// attribution, for each measure, the figure and its variance; and the totals.
fn merge_figures(paths: &[PathBuf]) -> Figures {
    let acc = merge::merge_files(
        paths,
        &SymbolizeOptions::default(),
        &ReadPolicy::default(),
        2,
        &|| {},
    )
    .unwrap();
    let merged = acc.to_resolved("merge");
    let mut per_function = BTreeMap::new();
    let mut totals = [(0.0, 0.0); 4];
    let measures = [
        Measure::InuseObjects,
        Measure::InuseSpace,
        Measure::AllocObjects,
        Measure::AllocSpace,
    ];
    for (m, measure) in measures.into_iter().enumerate() {
        let options = ReportOptions {
            measure,
            attribution: Attribution::user_code(),
            interval: true,
            ..ReportOptions::default()
        };
        let r = report::build(std::slice::from_ref(&merged), &options);
        totals[m] = (r.total, r.total_variance);
        for row in r.rows {
            per_function.insert((m, row.name.clone()), (row.flat, row.flat_variance));
        }
    }
    (per_function, totals)
}

/// Whether a frame name is an address nothing names (`0x` and 16 hex digits, or the digits
/// alone where no program was looked in, as the reports print them).
fn is_address(name: &str) -> bool {
    let digits = name.strip_prefix("0x").unwrap_or(name);
    digits.len() == 16 && digits.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Rows summed per function the way a query would: `GROUP BY user_frame`, the unnamed frames
/// (named by address, which differs between processes) by `locations`, as merge merges them.
fn row_figures(rows: &[Row]) -> Figures {
    let mut per_function: BTreeMap<(usize, String), (f64, f64)> = BTreeMap::new();
    let mut totals = [(0.0, 0.0); 4];
    for row in rows {
        let function = match &row.user_frame {
            Some(f) if is_address(f) => {
                // The location of the frame whose lookup key (callers minus one) is `f`.
                let key = u64::from_str_radix(f.trim_start_matches("0x"), 16).unwrap();
                let j = (0..row.addresses.len())
                    .find(|&j| jeprof_dumpfmt::model::symbol_key(j, row.addresses[j]) == key)
                    .unwrap();
                row.locations[j].clone()
            }
            Some(f) => f.clone(),
            None => continue,
        };
        for (m, total) in totals.iter_mut().enumerate() {
            let (value, variance) = (row.figures[m], row.figures[m + 4]);
            let e = per_function.entry((m, function.clone())).or_default();
            e.0 += value;
            e.1 += variance;
            total.0 += value;
            total.1 += variance;
        }
    }
    (per_function, totals)
}

#[test]
fn row_sums_equal_merges_figures_per_function_and_in_total_across_periods_builds_and_aslr() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for seed in 1..=6 {
        let p = dir.path().join(format!("fleet-{seed}.heap"));
        jeprof_dumpfmt::write::write_file(&fleet_dump(seed, 300), &p, &WriteOptions::default())
            .unwrap();
        paths.push(p);
    }
    for (i, shift) in [0u64, 0x1234_5000, 0x7_0000_0000].into_iter().enumerate() {
        let p = dir.path().join(format!("pie-{i}.heap"));
        std::fs::write(&p, common::relocated_pie(shift)).unwrap();
        paths.push(p);
    }
    let out = dir.path().join("fleet.parquet");
    export(&["--jobs", "3"], &paths, &out);
    let (rows, metadata) = read_rows(&out);
    assert_eq!(
        metadata.get("jeprof.schema_version").map(String::as_str),
        Some("1")
    );
    let periods: std::collections::BTreeSet<i64> = rows.iter().map(|r| r.sample_period).collect();
    assert!(periods.len() >= 3, "{periods:?}");

    let (want, want_totals) = merge_figures(&paths);
    let (got, got_totals) = row_figures(&rows);
    for m in 0..4 {
        let (w, g) = (want_totals[m], got_totals[m]);
        assert!(
            close(w.0, g.0) && close(w.1, g.1),
            "total {m}: merge {w:?}, rows {g:?}"
        );
    }
    let shown = |map: &BTreeMap<(usize, String), (f64, f64)>| -> Vec<(usize, String)> {
        map.iter()
            .filter(|(_, v)| v.0 != 0.0)
            .map(|(k, _)| k.clone())
            .collect()
    };
    let (got_names, want_names) = (shown(&got), shown(&want));
    let only_rows: Vec<_> = got_names
        .iter()
        .filter(|k| !want_names.contains(k))
        .collect();
    let only_merge: Vec<_> = want_names
        .iter()
        .filter(|k| !got_names.contains(k))
        .collect();
    assert!(
        only_rows.is_empty() && only_merge.is_empty(),
        "only in rows: {only_rows:?}; only in merge: {only_merge:?}"
    );
    assert!(
        want.keys().any(|(_, f)| f.starts_with("prog_pie+0x")),
        "ASLR frames"
    );
    assert!(
        want.keys().any(|(_, f)| f.ends_with(" (inline)")),
        "inlined frames"
    );
    for (key, w) in &want {
        let g = got.get(key).copied().unwrap_or_default();
        assert!(
            close(w.0, g.0) && close(w.1, g.1),
            "{key:?}: merge {w:?}, rows {g:?}"
        );
    }
    // The allocator's frames are gone from `frames`, never from `locations`/`addresses`.
    assert!(rows.iter().all(|r| !r.frames.iter().any(|f| f == "malloc")));
    assert!(rows.iter().any(|r| r.locations.len() > r.frames.len()));
    assert!(rows.iter().all(|r| r.addresses.len() == r.locations.len()));
    assert!(rows.iter().all(|r| r.leaf.as_ref() == r.frames.first()));

    // The same file, whatever the number of workers.
    let one = dir.path().join("one.parquet");
    export(&["--jobs", "1"], &paths, &one);
    assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&out).unwrap());
}

#[test]
fn a_real_jemalloc_dump_and_a_merged_dump_export_their_totals() {
    let dir = tempfile::tempdir().unwrap();
    // jemalloc's own dump (`shared/real-dumps/`, beside the project), when present.
    let mut inputs: Vec<PathBuf> = common::real_dump().into_iter().collect();
    inputs.push(common::fixtures().join("symbolized.heap"));
    let merged = dir.path().join("merged.heap");
    let mut args = vec![
        "merge".to_string(),
        "-o".into(),
        merged.display().to_string(),
    ];
    args.extend(
        [
            common::fixtures().join("a.heap"),
            common::fixtures().join("b.heap"),
        ]
        .iter()
        .map(|p| p.display().to_string()),
    );
    common::run_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    inputs.push(merged);
    let out = dir.path().join("out.parquet");
    export(&[], &inputs, &out);
    let (rows, _) = read_rows(&out);
    for path in &inputs {
        let mut profile = jeprof_dumpfmt::read::read_file(path).unwrap();
        let t = profile.totals();
        let want = [
            t.inuse.objects,
            t.inuse.bytes,
            t.accum.objects,
            t.accum.bytes,
            t.inuse.objects_variance,
            t.inuse.bytes_variance,
            t.accum.objects_variance,
            t.accum.bytes_variance,
        ];
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.dump == path.display().to_string())
            .collect();
        profile.coalesce();
        assert_eq!(mine.len(), profile.stacks.len(), "{}", path.display());
        for (k, w) in want.iter().enumerate() {
            let got: f64 = mine.iter().map(|r| r.figures[k]).sum();
            assert!(
                close(*w, got),
                "{} column {k}: {w} vs {got}",
                path.display()
            );
        }
        assert!(mine.iter().all(|r| r.thread.is_none()));
    }
}

#[test]
fn per_thread_rows_add_up_to_the_thread_lines_which_are_not_the_stacks_figures() {
    let Some(real) = common::real_dump() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threads.parquet");
    export(&["--per-thread"], std::slice::from_ref(&real), &out);
    let (rows, _) = read_rows(&out);
    let profile = jeprof_dumpfmt::read::read_file(&real).unwrap();
    let thread_lines: f64 = profile
        .stacks
        .iter()
        .flat_map(|s| &s.threads)
        .map(|t| t.counts.inuse.bytes)
        .sum();
    let rows_sum: f64 = rows.iter().map(|r| r.figures[1]).sum();
    assert!(rows.iter().all(|r| r.thread.is_some()));
    assert!(
        close(rows_sum, thread_lines),
        "{rows_sum} vs {thread_lines}"
    );
    // Why they are opt-in: each line is unbiased with its own average size.
    let stacks = profile.totals().inuse.bytes;
    assert!(
        (rows_sum - stacks).abs() > 1e-6 * stacks,
        "{rows_sum} vs {stacks}"
    );
}

#[test]
fn labels_come_from_the_dump_and_the_command_line_with_pid_time_and_binary_fallbacks() {
    let dir = tempfile::tempdir().unwrap();
    let mut labelled = fleet_dump(7, 5);
    labelled.labels = [
        ("program", "kv-store"),
        ("build_id", "0123abcd"),
        ("pid", "4242"),
        ("time", "2026-11-24T08:30:00Z"),
        ("region", "eu-west-1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let with_labels = dir.path().join("fleet-7.heap");
    jeprof_dumpfmt::write::write_file(&labelled, &with_labels, &WriteOptions::default()).unwrap();
    // No labels: the pid from jemalloc's name, the time from the file, the program from the map.
    let mut bare = fleet_dump(8, 5);
    bare.symbols.as_mut().unwrap().binary = None;
    let named = dir.path().join("app.77.3.i2.heap");
    jeprof_dumpfmt::write::write_file(&bare, &named, &WriteOptions::default()).unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    std::fs::File::options()
        .write(true)
        .open(&named)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let out = dir.path().join("labels.parquet");
    export(
        &["--label", "region=us-east-1", "--label", "env=prod"],
        &[with_labels.clone(), named.clone()],
        &out,
    );
    let (rows, _) = read_rows(&out);
    let first = rows
        .iter()
        .find(|r| r.dump == with_labels.display().to_string())
        .unwrap();
    assert_eq!(first.pid, Some(4242));
    assert_eq!(first.time, Some(1_795_509_000_000_000));
    assert_eq!(first.build_id.as_deref(), Some("0123abcd"));
    assert_eq!(first.binary.as_deref(), Some("kv-store"));
    let labels: Vec<(&str, &str)> = first
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("program", "kv-store"),
            ("build_id", "0123abcd"),
            ("pid", "4242"),
            ("time", "2026-11-24T08:30:00Z"),
            ("region", "us-east-1"),
            ("env", "prod"),
        ]
    );
    let second = rows
        .iter()
        .find(|r| r.dump == named.display().to_string())
        .unwrap();
    assert_eq!(second.pid, Some(77));
    assert_eq!(second.time, Some(1_700_000_000_000_000));
    assert_eq!(second.build_id, None);
    assert_eq!(second.binary.as_deref(), Some("service"));
    assert_eq!(
        second.labels,
        [
            ("region".to_string(), "us-east-1".to_string()),
            ("env".into(), "prod".into())
        ]
    );
}

/// Files in `dir` other than the dumps the test put there.
fn leftovers(dir: &Path, dumps: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !dumps.contains(&n.as_str()))
        .collect()
}

#[test]
fn a_cut_or_malformed_dump_fails_with_the_readers_error_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.heap");
    std::fs::copy(common::fixtures().join("symbolized.heap"), &good).unwrap();
    let whole = std::fs::read_to_string(&good).unwrap();
    let cut = dir.path().join("cut.heap");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let bad = dir.path().join("bad.heap");
    std::fs::write(
        &bad,
        "heap_v2/524288\n@ 0x1\n  t*: 1: 0 [0: 0]\nMAPPED_LIBRARIES:\n",
    )
    .unwrap();
    let out = dir.path().join("out.parquet");
    for (dump, want) in [
        (&cut, "truncated dump"),
        (&bad, "bad.heap:3: expected bytes above zero"),
    ] {
        let o = out.display().to_string();
        let args = [
            "export",
            "-o",
            &o,
            good.to_str().unwrap(),
            dump.to_str().unwrap(),
        ];
        let run = common::run(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
        assert!(stderr.contains(&dump.display().to_string()), "{stderr}");
        assert_eq!(
            leftovers(dir.path(), &["good.heap", "cut.heap", "bad.heap"]),
            Vec::<String>::new()
        );
    }
    // A cut dump reads with --allow-truncated, as in every other subcommand.
    let o = out.display().to_string();
    let run = common::run(&[
        "export",
        "--allow-truncated",
        "-o",
        &o,
        cut.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!read_rows(&out).0.is_empty());
    // A bad --label is refused before anything is read.
    let run = common::run(&[
        "export",
        "--label",
        "a b=c",
        "-o",
        &o,
        good.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--label \"a b=c\""));
}

/// Per `user_frame`, the sums of the six residency columns over the rows of `path`: each
/// `(bytes, variance)` figure, `None` when its column is null in every row.
fn rss_sums(path: &Path) -> BTreeMap<String, [Option<(f64, f64)>; 3]> {
    let file = std::fs::File::open(path).unwrap();
    let mut out: BTreeMap<String, [Option<(f64, f64)>; 3]> = BTreeMap::new();
    for batch in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let b = batch.unwrap();
        let col = |name: &str| {
            b.column_by_name(name)
                .unwrap_or_else(|| panic!("no column {name}"))
                .as_primitive::<Float64Type>()
                .clone()
        };
        let user = b.column_by_name("user_frame").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            let sums = out.entry(user.value(i).to_string()).or_default();
            for (k, figure) in ["resident_bytes", "swapped_bytes", "fragmentation_bytes"]
                .into_iter()
                .enumerate()
            {
                let (bytes, var) = (col(figure), col(&format!("{figure}_var")));
                assert_eq!(bytes.is_valid(i), var.is_valid(i), "{figure} row {i}");
                if bytes.is_valid(i) {
                    let sum = sums[k].get_or_insert((0.0, 0.0));
                    sum.0 += bytes.value(i);
                    sum.1 += var.value(i);
                }
            }
        }
    }
    out
}

#[test]
fn residency_columns_sum_per_function_to_report_rss_and_are_null_without_figures() {
    let dir = tempfile::tempdir().unwrap();
    for (name, rss) in [
        ("jemalloc", Some(true)),
        ("system", Some(false)),
        ("plain", None),
    ] {
        let dump = dir.path().join(format!("{name}.heap"));
        rss_dump::write_dump(&dump, rss);
        let out = dir.path().join(format!("{name}.parquet"));
        export(&[], std::slice::from_ref(&dump), &out);
        let sums = rss_sums(&out);
        assert_eq!(sums.len(), 3, "{name}: {sums:?}");
        let Some(jemalloc) = rss else {
            assert!(
                sums.values().all(|s| s.iter().all(Option::is_none)),
                "{name}: a dump without residency figures has them null: {sums:?}"
            );
            continue;
        };
        let json = common::run_ok(&["report", "--rss", "--json", dump.to_str().unwrap()]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        for site in v["sites"].as_array().unwrap() {
            let function = site["function"].as_str().unwrap();
            let row = sums[function];
            for (k, figure) in ["resident_bytes", "swapped_bytes", "fragmentation_bytes"]
                .into_iter()
                .enumerate()
            {
                let Some((bytes, variance)) = row[k] else {
                    assert!(
                        k == 2 && !jemalloc && site[figure].is_null(),
                        "{name} {function}: {figure} null in the rows, {} in {json}",
                        site[figure]
                    );
                    continue;
                };
                assert_eq!(
                    site[figure].as_f64(),
                    Some(bytes),
                    "{name} {function} {figure}"
                );
                let (lo, _) = jeprof_dumpfmt::math::confidence_interval_95(bytes, variance);
                let report_lo = site[format!("{figure}_lo")].as_f64().unwrap();
                assert!(
                    close(lo, report_lo),
                    "{name} {function} {figure}: {lo} {report_lo}"
                );
            }
        }
    }
}
