//! `scheme-report`: sampling schemes evaluated on the error of the estimate against exact truth.
//!
//! ```text
//! cargo run --release -p jeprof-bench --bin scheme-report -- --out bench/schemes
//! ```
//!
//! runs the leaky heap and the high-reuse loop in this process (under jemalloc, so the addresses
//! the schemes see are jemalloc's), records redis, memcached and nginx under their load generators
//! with heaptrack (skipped, and said so, when they are not installed, or with `--no-servers`),
//! replays every trace through every scheme over `--seeds` seeds, measures each scheme's
//! instructions under callgrind (`--driver`, a small driver per scheme), and writes
//! `REPORT.md` with its SVG figures into `--out`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::rc::Rc;
use std::time::Instant;

use clap::Parser;
use jeprof_bench::schemes::evaluate::{evaluate, WorkloadResult};
use jeprof_bench::schemes::heaptrack::{self, Preloads, Server};
use jeprof_bench::schemes::report::{self, Overhead, ReportInput};
use jeprof_bench::schemes::scheme::{Scheme, SchemeSpec, SplitMix64};
use jeprof_bench::schemes::trace::Trace;
use jeprof_bench::schemes::workloads;

// The schemes must see the addresses jemalloc hands out.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(about = "Sampling schemes compared on the error of the estimate (issue 18)")]
struct Args {
    /// Directory for REPORT.md and the SVG figures.
    #[arg(long, required_unless_present = "driver")]
    out: Option<PathBuf>,
    /// Seeds per workload.
    #[arg(long, default_value_t = 30)]
    seeds: u64,
    /// Objects of the leaky heap.
    #[arg(long, default_value_t = 100_000)]
    objects: usize,
    /// Rounds of the high-reuse loop.
    #[arg(long, default_value_t = 1_000_000)]
    reuse_rounds: usize,
    /// Leaked blocks per leak site in the high-reuse loop.
    #[arg(long, default_value_t = 40)]
    reuse_leaks: usize,
    /// Leave the server traces out.
    #[arg(long)]
    no_servers: bool,
    /// Read `<server>.raw` (heaptrack raw files) from this directory instead of recording them; the
    /// snapshot is then the last allocation before the teardown's frees.
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Events read from a server trace at most.
    #[arg(long, default_value_t = 3_000_000)]
    max_events: usize,
    /// Leave the callgrind measurement out.
    #[arg(long)]
    no_callgrind: bool,
    /// Run one scheme's decisions on a fixed stream, for callgrind (a scheme label).
    #[arg(long, hide = true)]
    driver: Option<String>,
    /// Allocations of the driver's stream.
    #[arg(long, default_value_t = 1_000_000, hide = true)]
    driver_allocations: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match &args.driver {
        Some(label) => driver(label, args.driver_allocations),
        None => run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scheme-report: {e}");
            ExitCode::from(2)
        }
    }
}

fn spec_named(label: &str) -> Result<SchemeSpec, String> {
    SchemeSpec::compared()
        .into_iter()
        .find(|s| s.label() == label)
        .ok_or_else(|| {
            let known: Vec<String> = SchemeSpec::compared().iter().map(|s| s.label()).collect();
            format!("no scheme {label:?}; expected one of {}", known.join(", "))
        })
}

/// The decision, kept out of line so that callgrind can count it alone.
#[inline(never)]
fn scheme_decide_one(scheme: &mut dyn Scheme, addr: u64, size: u64) -> Option<f64> {
    scheme.decide(addr, size)
}

/// A sample's weighing and recording (into a per-site table), counted apart from the decision.
#[inline(never)]
fn scheme_record_one(scheme: &dyn Scheme, size: u64, p: f64, site: usize, table: &mut [[f64; 2]]) {
    let w = scheme.weigh(size, p);
    table[site][0] += w.bytes;
    table[site][1] += w.bytes_variance;
}

fn driver(label: &str, allocations: usize) -> Result<(), String> {
    let spec = spec_named(label)?;
    // A churn of 1,000 live blocks of 16–4096 B: the addresses are jemalloc's for such a churn.
    let mut rng = SplitMix64::new(1);
    let mut stream = Vec::with_capacity(allocations);
    let mut live: std::collections::VecDeque<Vec<u8>> = Default::default();
    for _ in 0..allocations {
        let size = rng.between(16, 4096);
        let block: Vec<u8> = Vec::with_capacity(size as usize);
        stream.push((block.as_ptr() as u64, size, (size % 4) as usize));
        live.push_back(block);
        if live.len() > 1000 {
            live.pop_front();
        }
    }
    let mut scheme = spec.instantiate(1);
    let mut table = [[0.0f64; 2]; 4];
    let mut sampled = 0u64;
    for &(addr, size, site) in &stream {
        if let Some(p) = scheme_decide_one(scheme.as_mut(), addr, size) {
            scheme_record_one(scheme.as_ref(), size, p, site, &mut table);
            sampled += 1;
        }
    }
    println!(
        "allocations {allocations} sampled {sampled} estimate {}",
        table.iter().map(|t| t[0]).sum::<f64>()
    );
    Ok(())
}

/// Instructions callgrind collected inside functions matching `pattern`.
fn callgrind(exe: &Path, label: &str, pattern: &str, dir: &Path) -> Result<(f64, u64), String> {
    let out_file = dir.join("callgrind.out");
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(format!("--toggle-collect={pattern}"))
        .arg(exe)
        .args(["--driver", label])
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "valgrind on the {label} driver failed: {}",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sampled: u64 = stdout
        .split_whitespace()
        .skip_while(|w| *w != "sampled")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the {label} driver printed no sample count: {stdout:?}"))?;
    let text =
        std::fs::read_to_string(&out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
    let total = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|n| n.split_whitespace().next()?.parse::<f64>().ok())
        .ok_or_else(|| format!("{} has no summary line", out_file.display()))?;
    let _ = std::fs::remove_file(&out_file);
    Ok((total, sampled))
}

fn overhead(allocations: usize) -> Result<Vec<Overhead>, String> {
    if !heaptrack::installed("valgrind") {
        return Err("valgrind is not installed (apt-get install valgrind)".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let mut rows = Vec::new();
    for spec in SchemeSpec::compared() {
        let label = spec.label();
        let (decide, sampled) = callgrind(&exe, &label, "*scheme_decide_one*", dir.path())?;
        let (record, _) = callgrind(&exe, &label, "*scheme_record_one*", dir.path())?;
        eprintln!("callgrind {label}: {decide} + {record} instructions, {sampled} samples");
        rows.push(Overhead {
            scheme: spec,
            per_allocation: decide / allocations as f64,
            per_sample: if sampled == 0 {
                f64::NAN
            } else {
                record / sampled as f64
            },
            sampled_fraction: sampled as f64 / allocations as f64,
        });
    }
    Ok(rows)
}

fn server_traces(args: &Args, skipped: &mut Vec<String>) -> Vec<(String, Trace, String)> {
    if args.no_servers {
        skipped.push("the server traces (`--no-servers`)".into());
        return Vec::new();
    }
    let recording = match &args.traces {
        Some(_) => None,
        None => match Preloads::find().and_then(|p| {
            tempfile::tempdir()
                .map(|d| (p, d))
                .map_err(|e| format!("a temporary directory: {e}"))
        }) {
            Ok(r) => Some(r),
            Err(e) => {
                skipped.push(format!("the server traces: {e}"));
                return Vec::new();
            }
        },
    };
    let mut traces = Vec::new();
    for server in Server::ALL {
        let (raw, snapshot_ms) = match (&args.traces, &recording) {
            (Some(dir), _) => (dir.join(format!("{}.raw", server.name())), None),
            (None, Some((preloads, dir))) => {
                if let Some(missing) = server
                    .programs()
                    .into_iter()
                    .find(|p| !heaptrack::installed(p))
                {
                    skipped.push(format!("{}: `{missing}` is not installed", server.name()));
                    continue;
                }
                eprintln!("recording {} under heaptrack…", server.name());
                match heaptrack::record(server, dir.path(), preloads) {
                    Ok((raw, ms)) => (raw, Some(ms)),
                    Err(e) => {
                        skipped.push(format!("{}: recording failed: {e}", server.name()));
                        continue;
                    }
                }
            }
            (None, None) => unreachable!("recording is set up when no trace directory is given"),
        };
        let parsed = std::fs::File::open(&raw)
            .map_err(|e| format!("{}: {e}", raw.display()))
            .and_then(|f| {
                heaptrack::read_raw(std::io::BufReader::new(f), args.max_events, snapshot_ms)
            })
            .map_err(|e| format!("{}: {e}", raw.display()));
        match parsed {
            Ok(trace) => {
                let what = format!(
                    "heaptrack raw trace of `{}` (jemalloc preloaded beneath heaptrack) under {}, snapshot when the load ended (with `--traces`: at the last allocation before the teardown); site = the two leaf-most frames in the server's executable (the allocation wrapper and its caller), named by `addr2line` (in a stripped executable the nearest exported symbol, which may be wrong; the offsets are exact)",
                    server.programs()[0],
                    server.load()
                );
                traces.push((server.name().to_string(), trace, what));
            }
            Err(e) => skipped.push(format!("{}: {e}", server.name())),
        }
        if recording.is_some() {
            // Raw traces run to hundreds of MB: drop each once read.
            let _ = std::fs::remove_file(&raw);
        }
    }
    traces
}

fn run(args: &Args) -> Result<(), String> {
    let out = args
        .out
        .as_ref()
        .expect("clap requires --out without --driver");
    let start = Instant::now();
    let schemes = SchemeSpec::compared();
    let mut skipped = Vec::new();
    let mut results: Vec<(WorkloadResult, String)> = Vec::new();
    eprintln!("leaky heap…");
    results.push((
        evaluate("leaky", &schemes, args.seeds, |seed| {
            Rc::new(workloads::leaky(args.objects, seed))
        }),
        format!(
            "{} objects of 16–4096 B from four sites with different size mixes, about 5% leaked (a new heap per seed); snapshot at the end",
            args.objects
        ),
    ));
    eprintln!("high reuse…");
    results.push((
        evaluate("high-reuse", &schemes, args.seeds, |seed| {
            Rc::new(workloads::high_reuse(100, args.reuse_rounds, args.reuse_leaks, seed))
        }),
        format!(
            "100 hot slots of fixed sizes (60 of 32–256 B, 40 of 1–4 KiB) freed and reallocated {} times; {} leaked blocks at each of two leak sites; snapshot at the end",
            args.reuse_rounds, args.reuse_leaks
        ),
    ));
    for (name, trace, what) in server_traces(args, &mut skipped) {
        eprintln!("replaying {name} ({} events)…", trace.events.len());
        let trace = Rc::new(trace);
        results.push((
            evaluate(&name, &schemes, args.seeds, |_| Rc::clone(&trace)),
            what,
        ));
    }
    let overhead = if args.no_callgrind {
        Err("left out (`--no-callgrind`)".to_string())
    } else {
        eprintln!("callgrind…");
        overhead(args.driver_allocations)
    };
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let command = std::env::args().skip(1).fold(
        String::from("cargo run --release -p jeprof-bench --bin scheme-report --"),
        |c, a| c + " " + &a,
    );
    report::write(
        out,
        &ReportInput {
            workloads: &results,
            overhead,
            skipped: &skipped,
            seeds: args.seeds,
            command: &command,
            elapsed_s: start.elapsed().as_secs_f64(),
            date: &date,
        },
    )?;
    eprintln!("wrote {}", out.join("REPORT.md").display());
    Ok(())
}
