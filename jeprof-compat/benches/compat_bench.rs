//! Benchmark: `cargo bench -p jeprof-compat` (release build). Prints figures and ratios measured in
//! one run; asserts nothing.
//!
//! 1. Fleet merge: generates `BENCH_DUMPS` (default 1,000) symbolized dumps of `BENCH_STACKS`
//!    (default 5,000) stacks each, drawn from a universe of 20,000 stacks over 3,000 functions, each
//!    dump at its own address base (another build) and its own sample period, then times
//!    `jeprof-compat merge --jobs 2` on all of them with `/usr/bin/time` (wall time and peak RSS).
//! 2. The same dumps through the real jeprof (`jeprof --text` adds several profiles), which is far
//!    too slow for all of them: it runs on the first `BENCH_JEPROF_DUMPS` (default 10) dumps, and
//!    ours runs on the same subset for a like-for-like ratio.
//! 3. Report on one 50,000-stack dump: `jeprof-compat report --text` against `jeprof --text`.
//!
//! The real jeprof is made from the tikv-jemalloc-sys sources in the cargo registry by
//! `jeprof_conformance::try_jeprof` (needs perl and binutils); without it (or with
//! `BENCH_NO_JEPROF=1`) only our figures are printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack, SymbolTable, WriteOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The universe: stacks as lists of function indices, leaf first.
fn universe(stacks: usize, functions: u64) -> Vec<Vec<u64>> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..stacks)
        .map(|_| {
            let depth = 6 + rng.below(10) as usize;
            (0..depth).map(|_| rng.below(functions)).collect()
        })
        .collect()
}

fn function_name(f: u64) -> String {
    format!("service::module_{}::Type{}::method_{f}", f % 37, f % 101)
}

fn make_dump(universe: &[Vec<u64>], stacks: usize, seed: u64) -> Profile {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let period = 1u64 << (16 + rng.below(5));
    let base = 0x5500_0000_0000 + (seed % 4096) * 0x10_0000;
    let mut profile = Profile::new(period);
    let mut names = BTreeMap::new();
    let start = rng.below(universe.len() as u64) as usize;
    for i in 0..stacks {
        let functions = &universe[(start + i * 3) % universe.len()];
        // Each function at a fixed offset in this build, with up to four call sites.
        let frames: Vec<u64> = functions
            .iter()
            .enumerate()
            .map(|(depth, &f)| base + f * 0x400 + (depth as u64 % 4) * 8 + 1)
            .collect();
        for (k, &a) in frames.iter().enumerate() {
            names
                .entry(if k == 0 { a } else { a - 1 })
                .or_insert_with(|| vec![function_name(functions[k])]);
        }
        let size = 8.0 * (1 + rng.below(4096)) as f64;
        let samples = 1 + rng.below(20);
        let mut e = Estimate::default();
        for _ in 0..samples {
            e.add(&Estimate::of_sample(size, period as f64));
        }
        profile.stacks.push(Stack {
            frames,
            counts: Counts { inuse: e, accum: e },
            threads: Vec::new(),
        });
    }
    profile.symbols = Some(SymbolTable {
        binary: Some("service".into()),
        names,
    });
    profile
}

/// Runs `cmd` under `/usr/bin/time`, returning (wall seconds, peak RSS in MiB).
fn timed(program: &Path, args: &[String], stdout: &Path) -> Option<(f64, f64)> {
    let stats = std::env::temp_dir().join(format!("compat-bench-time-{}", std::process::id()));
    let started = Instant::now();
    let status = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&stats)
        .arg(program)
        .args(args)
        .stdout(std::fs::File::create(stdout).ok()?)
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    let wall = started.elapsed().as_secs_f64();
    if !status.success() {
        eprintln!("  ({} exited with {status})", program.display());
    }
    let kib: f64 = std::fs::read_to_string(&stats)
        .ok()?
        .trim()
        .lines()
        .last()?
        .parse()
        .ok()?;
    let _ = std::fs::remove_file(stats);
    Some((wall, kib / 1024.0))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dumps = env_usize("BENCH_DUMPS", 1000);
    let stacks = env_usize("BENCH_STACKS", 5000);
    let jeprof_dumps = env_usize("BENCH_JEPROF_DUMPS", 10).min(dumps);
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_jeprof-compat"));
    let dir = tempfile::tempdir().expect("temp dir");
    // BENCH_KEEP=1 keeps the generated dumps (for profiling) and prints where.
    let dir_path = if std::env::var_os("BENCH_KEEP").is_some() {
        let kept = dir.keep();
        println!("   (dumps kept in {})", kept.display());
        kept
    } else {
        dir.path().to_path_buf()
    };
    let perl = Path::new("/usr/bin/perl");
    // BENCH_NO_JEPROF=1 skips the (slow) real jeprof runs.
    let jeprof = if std::env::var_os("BENCH_NO_JEPROF").is_some() {
        None
    } else {
        match jeprof_conformance::try_jeprof() {
            Ok(j) => Some(j.script.clone()),
            Err(why) => {
                println!("   (no real jeprof here, only our figures: {why})");
                None
            }
        }
    };

    println!("== generating {dumps} dumps x {stacks} stacks (symbolized, per-dump address base and period)");
    let started = Instant::now();
    let all = universe(20_000, 3_000);
    let paths: Vec<PathBuf> = (0..dumps)
        .map(|i| {
            let p = dir_path.as_path().join(format!("fleet-{i:04}.heap"));
            jeprof_dumpfmt::write::write_file(
                &make_dump(&all, stacks, i as u64 + 1),
                &p,
                &WriteOptions::default(),
            )
            .expect("write dump");
            p
        })
        .collect();
    let bytes: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    println!(
        "   {:.1} s, {:.0} MiB on disk",
        started.elapsed().as_secs_f64(),
        bytes as f64 / 1048576.0
    );

    let out = dir_path.as_path().join("merged.heap");
    let mut args = vec![
        "merge".to_string(),
        "--jobs".into(),
        "2".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    println!("== jeprof-compat merge --jobs 2 -o merged.heap <{dumps} dumps>");
    let sink = dir_path.as_path().join("stdout");
    if let Some((wall, rss)) = timed(&ours, &args, &sink) {
        println!(
            "   {wall:.2} s wall, peak RSS {rss:.0} MiB, {:.0} MB/s of dump text",
            bytes as f64 / 1e6 / wall
        );
    }
    let merged_stacks = jeprof_dumpfmt::read::read_file(&out)
        .map(|p| p.stacks.len())
        .unwrap_or(0);
    println!("   merged dump: {merged_stacks} stack records");
    // Peak memory against the number of dumps: same distinct stacks, a tenth of the dumps.
    let tenth = (dumps / 10).max(1);
    let mut args_tenth = vec![
        "merge".to_string(),
        "--jobs".into(),
        "2".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    args_tenth.extend(paths[..tenth].iter().map(|p| p.display().to_string()));
    if let Some((wall, rss)) = timed(&ours, &args_tenth, &sink) {
        println!("   same merge on {tenth} dumps: {wall:.2} s wall, peak RSS {rss:.0} MiB (memory follows distinct stacks, not dumps)");
    }

    let subset: Vec<String> = paths[..jeprof_dumps]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    println!("== adding {jeprof_dumps} of those dumps: jeprof --text --show_bytes vs jeprof-compat report --show_bytes");
    let mut ours_args = vec![
        "report".to_string(),
        "--show_bytes".into(),
        "--keep_alloc_frames".into(),
    ];
    ours_args.extend(subset.iter().cloned());
    let ours_subset = timed(&ours, &ours_args, &sink);
    if let (Some(script), Some((ours_wall, _))) = (&jeprof, ours_subset) {
        let mut jargs = vec![
            script.display().to_string(),
            "--text".into(),
            "--show_bytes".into(),
        ];
        jargs.extend(subset.iter().cloned());
        if let Some((wall, rss)) = timed(perl, &jargs, &sink) {
            println!(
                "   jeprof {wall:.2} s (peak RSS {rss:.0} MiB), ours {ours_wall:.3} s: ours {:.0}x faster; jeprof on all {dumps} dumps would take about {:.0} s (linear extrapolation)",
                wall / ours_wall,
                wall * dumps as f64 / jeprof_dumps as f64
            );
        }
    } else if let Some((w, _)) = ours_subset {
        println!("   ours {w:.3} s (no perl/jeprof here for the ratio)");
    }

    println!("== report --text on one 50,000-stack dump");
    let big = dir_path.as_path().join("big.heap");
    jeprof_dumpfmt::write::write_file(
        &make_dump(&universe(50_000, 20_000), 50_000, 7),
        &big,
        &WriteOptions::default(),
    )
    .expect("write big dump");
    let big_s = big.display().to_string();
    let ours_big = timed(
        &ours,
        &["report".into(), "--keep_alloc_frames".into(), big_s.clone()],
        &sink,
    );
    if let Some((w, rss)) = ours_big {
        println!("   jeprof-compat {w:.3} s, peak RSS {rss:.0} MiB");
    }
    if let (Some(script), Some((ours_wall, _))) = (&jeprof, ours_big) {
        if let Some((wall, rss)) = timed(
            perl,
            &[script.display().to_string(), "--text".into(), big_s],
            &sink,
        ) {
            println!(
                "   jeprof {wall:.2} s, peak RSS {rss:.0} MiB: ours {:.0}x faster",
                wall / ours_wall
            );
        }
    }
}
