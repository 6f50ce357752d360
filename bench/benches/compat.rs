//! The tools against the real jeprof, measured in one run (never assertions). See
//! `bench/README.md`.
//!
//! ```text
//! cargo build --release -p jeprof-compat && cargo bench -p jeprof-bench --bench compat
//! ```
//!
//! 1. Fleet merge: generates `--dumps` (default 1,000) symbolized dumps of `--stacks` (default
//!    5,000) stacks each, drawn from a universe of 20,000 stacks over 3,000 functions, each dump at
//!    its own address base (another build) and its own sample period, then times
//!    `jeprof-compat merge --jobs 2` on all of them with `/usr/bin/time` (wall time and peak RSS),
//!    and on a tenth of them (memory follows distinct stacks, not dumps); then `jeprof-compat leaks`
//!    on all of them as one series.
//! 2. The same dumps through the real jeprof (`jeprof --text` adds several profiles), which is far
//!    too slow for all of them: it runs on the first `--jeprof-dumps` (default 10) dumps, and ours
//!    runs on the same subset for a like-for-like ratio.
//! 3. Report on one `--big-stacks`-stack dump (default 50,000): `jeprof-compat report` against
//!    `jeprof --text`.
//!
//! The `jeprof-compat` binary is another package's, which cargo does not build for this one: it
//! is taken from `--jeprof-compat`, or else from the profile directory this bench runs from
//! (`target/release/` under `cargo bench`), so build it first in the same profile. The real jeprof
//! is made from the tikv-jemalloc-sys sources in the cargo registry by
//! `jeprof_conformance::try_jeprof` (needs perl and binutils); without it (or with `--no-jeprof`)
//! only our figures are printed. Without `--bench` (under `cargo test`) it runs a tiny version
//! that fails when a tool fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::Parser;
use jeprof_dumpfmt::{Counts, Estimate, Profile, Stack, SymbolTable, WriteOptions};

/// The tools against the real jeprof: a fleet merge, reports of several dumps and of one large
/// dump, with wall time and peak RSS.
#[derive(Parser)]
#[command(
    name = "compat",
    bin_name = "cargo bench -p jeprof-bench --bench compat --",
    after_help = "Exit status: 0; 1 when a tool failed; 2 on bad flags or no jeprof-compat binary."
)]
struct Cli {
    /// Dumps in the fleet merge.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    dumps: u64,
    /// Stacks per dump.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    stacks: u64,
    /// How many of the dumps both tools report (the real jeprof is slow).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    jeprof_dumps: u64,
    /// Stacks of the single large dump.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    big_stacks: u64,
    /// Skips the (slow) real jeprof.
    #[arg(long)]
    no_jeprof: bool,
    /// Keeps the generated dumps (for profiling) and prints where.
    #[arg(long)]
    keep: bool,
    /// The jeprof-compat binary (default: the one in the profile directory this bench runs from).
    #[arg(long, value_name = "PATH")]
    jeprof_compat: Option<PathBuf>,
    /// A tiny version (20 dumps of 50 stacks) that fails when a tool fails (what runs without
    /// --bench, under cargo test).
    #[arg(long)]
    self_check: bool,
    /// Given by `cargo bench`: run the benchmark (without it, the self-check).
    #[arg(long, hide = true)]
    bench: bool,
}

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
        ..SymbolTable::default()
    });
    profile
}

/// Runs `program` with `args` under `/usr/bin/time`, its stdout to `stdout`: wall seconds and
/// peak RSS in MiB, or why not (a failed run is an error, with its status).
fn timed(program: &Path, args: &[String], stdout: &Path) -> Result<(f64, f64), String> {
    let stats = std::env::temp_dir().join(format!("compat-bench-time-{}", std::process::id()));
    let started = Instant::now();
    let out = std::fs::File::create(stdout).map_err(|e| format!("{}: {e}", stdout.display()))?;
    let status = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&stats)
        .arg(program)
        .args(args)
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("/usr/bin/time: {e}"))?;
    let wall = started.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("{} exited with {status}", program.display()));
    }
    let text = std::fs::read_to_string(&stats).map_err(|e| format!("{}: {e}", stats.display()))?;
    let _ = std::fs::remove_file(&stats);
    let kib: f64 = text
        .trim()
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| format!("/usr/bin/time printed {text:?}, not a peak RSS"))?;
    Ok((wall, kib / 1024.0))
}

/// The `jeprof-compat` binary: `--jeprof-compat`, or the one in the profile directory of this
/// executable (`target/<profile>/deps/compat-*` → `target/<profile>/jeprof-compat`).
fn ours(cli: &Cli) -> Result<PathBuf, String> {
    if let Some(path) = &cli.jeprof_compat {
        return if path.is_file() {
            Ok(path.clone())
        } else {
            Err(format!("--jeprof-compat: {} is not a file", path.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let candidate = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile_dir| profile_dir.join("jeprof-compat"))
        .filter(|p| p.is_file());
    candidate.ok_or_else(|| {
        format!(
            "no jeprof-compat binary beside {}: build it in the same profile first \
             (`cargo build --release -p jeprof-compat` for `cargo bench`, \
             `cargo build -p jeprof-compat` for `cargo test`), or pass --jeprof-compat PATH",
            exe.display()
        )
    })
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    let check = cli.self_check || !cli.bench;
    if check {
        cli.dumps = 20;
        cli.stacks = 50;
        cli.jeprof_dumps = 2;
        cli.big_stacks = 500;
    }
    let ours = match ours(&cli) {
        Ok(path) => path,
        Err(e) => {
            eprintln!("compat: {e}");
            return ExitCode::from(2);
        }
    };
    let failures = run(&cli, &ours);
    if failures.is_empty() {
        if check {
            println!("compat self-check: ok");
        }
        return ExitCode::SUCCESS;
    }
    eprintln!("\ncompat: {} runs failed:", failures.len());
    for f in failures {
        eprintln!("  {f}");
    }
    ExitCode::FAILURE
}

/// The three measurements; returns what failed.
fn run(cli: &Cli, ours: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let dumps = cli.dumps as usize;
    let stacks = cli.stacks as usize;
    let jeprof_dumps = (cli.jeprof_dumps as usize).min(dumps);
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => return vec![format!("temporary directory: {e}")],
    };
    let dir_path = if cli.keep {
        let kept = dir.keep();
        println!("   (dumps kept in {})", kept.display());
        kept
    } else {
        dir.path().to_path_buf()
    };
    let perl = Path::new("/usr/bin/perl");
    let jeprof = if cli.no_jeprof {
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
    let mut paths = Vec::with_capacity(dumps);
    for i in 0..dumps {
        let p = dir_path.join(format!("fleet-{i:04}.heap"));
        let dump = make_dump(&all, stacks, i as u64 + 1);
        if let Err(e) = jeprof_dumpfmt::write::write_file(&dump, &p, &WriteOptions::default()) {
            return vec![format!("writing {}: {e}", p.display())];
        }
        paths.push(p);
    }
    let bytes: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    println!(
        "   {:.1} s, {:.0} MiB on disk",
        started.elapsed().as_secs_f64(),
        bytes as f64 / 1048576.0
    );

    let out = dir_path.join("merged.heap");
    let merge_args = |inputs: &[PathBuf]| -> Vec<String> {
        let mut args = vec![
            "merge".to_string(),
            "--jobs".into(),
            "2".into(),
            "-o".into(),
            out.display().to_string(),
        ];
        args.extend(inputs.iter().map(|p| p.display().to_string()));
        args
    };
    println!("== jeprof-compat merge --jobs 2 -o merged.heap <{dumps} dumps>");
    let sink = dir_path.join("stdout");
    match timed(ours, &merge_args(&paths), &sink) {
        Ok((wall, rss)) => println!(
            "   {wall:.2} s wall, peak RSS {rss:.0} MiB, {:.0} MB/s of dump text",
            bytes as f64 / 1e6 / wall
        ),
        Err(e) => failures.push(format!("merge: {e}")),
    }
    match jeprof_dumpfmt::read::read_file(&out) {
        Ok(p) => println!("   merged dump: {} stack records", p.stacks.len()),
        Err(e) => failures.push(format!("reading the merged dump: {e}")),
    }
    // Peak memory against the number of dumps: same distinct stacks, a tenth of the dumps.
    let tenth = (dumps / 10).max(1);
    match timed(ours, &merge_args(&paths[..tenth]), &sink) {
        Ok((wall, rss)) => println!(
            "   same merge on {tenth} dumps: {wall:.2} s wall, peak RSS {rss:.0} MiB \
             (memory follows distinct stacks, not dumps)"
        ),
        Err(e) => failures.push(format!("merge of {tenth} dumps: {e}")),
    }

    // The same files as one long series (no time labels: ordered by name): `leaks` reads every
    // dump for its labels, then resolves at most 64 of them.
    println!("== jeprof-compat leaks <{dumps} dumps>");
    let mut leaks_args = vec!["leaks".to_string()];
    leaks_args.extend(paths.iter().map(|p| p.display().to_string()));
    match timed(ours, &leaks_args, &sink) {
        Ok((wall, rss)) => println!("   {wall:.2} s wall, peak RSS {rss:.0} MiB"),
        Err(e) => failures.push(format!("leaks: {e}")),
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
    let ours_subset = timed(ours, &ours_args, &sink);
    match (&jeprof, &ours_subset) {
        (_, Err(e)) => failures.push(format!("report of {jeprof_dumps} dumps: {e}")),
        (Some(script), Ok((ours_wall, _))) => {
            let mut jargs = vec![
                script.display().to_string(),
                "--text".into(),
                "--show_bytes".into(),
            ];
            jargs.extend(subset.iter().cloned());
            match timed(perl, &jargs, &sink) {
                Ok((wall, rss)) => println!(
                    "   jeprof {wall:.2} s (peak RSS {rss:.0} MiB), ours {ours_wall:.3} s: ours \
                     {:.0}x faster; jeprof on all {dumps} dumps would take about {:.0} s \
                     (linear extrapolation)",
                    wall / ours_wall,
                    wall * dumps as f64 / jeprof_dumps as f64
                ),
                Err(e) => failures.push(format!("jeprof on {jeprof_dumps} dumps: {e}")),
            }
        }
        (None, Ok((w, _))) => println!("   ours {w:.3} s (no perl/jeprof here for the ratio)"),
    }

    let big_stacks = cli.big_stacks as usize;
    println!("== report --text on one {big_stacks}-stack dump");
    let big = dir_path.join("big.heap");
    let big_dump = make_dump(
        &universe(big_stacks, (big_stacks as u64 * 2 / 5).max(1)),
        big_stacks,
        7,
    );
    if let Err(e) = jeprof_dumpfmt::write::write_file(&big_dump, &big, &WriteOptions::default()) {
        failures.push(format!("writing {}: {e}", big.display()));
        return failures;
    }
    let big_s = big.display().to_string();
    let ours_big = timed(
        ours,
        &["report".into(), "--keep_alloc_frames".into(), big_s.clone()],
        &sink,
    );
    match &ours_big {
        Ok((w, rss)) => println!("   jeprof-compat {w:.3} s, peak RSS {rss:.0} MiB"),
        Err(e) => failures.push(format!("report of the large dump: {e}")),
    }
    if let (Some(script), Ok((ours_wall, _))) = (&jeprof, ours_big) {
        match timed(
            perl,
            &[script.display().to_string(), "--text".into(), big_s],
            &sink,
        ) {
            Ok((wall, rss)) => println!(
                "   jeprof {wall:.2} s, peak RSS {rss:.0} MiB: ours {:.0}x faster",
                wall / ours_wall
            ),
            Err(e) => failures.push(format!("jeprof on the large dump: {e}")),
        }
    }
    failures
}
