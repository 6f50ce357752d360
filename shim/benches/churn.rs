//! Overhead of the shim, measured side by side in one run (never assertions):
//!
//! ```text
//! cargo bench -p jeprof-shim --bench churn --bench churn_plain
//! # frame pointers everywhere, so the fp unwinder sees whole stacks:
//! RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p jeprof-shim --bench churn --bench churn_plain
//! ```
//!
//! 1. A 2-thread churn (sizes 16–4096, 1,024 live objects per thread, 2 × 20 M allocations) under
//!    plain jemalloc, the shim with sampling off, the shim at R = 512 KiB with each unwinder, and
//!    jemalloc's own profiler (`prof:true,lg_prof_sample:19`). Each mode is a child process (the
//!    global allocator and jemalloc's options are fixed at start-up); modes are interleaved over
//!    9 rounds, and each mode's CPU time is compared with plain jemalloc's two ways: fastest round
//!    to fastest round, and the median of the per-round ratios.
//! 2. The cost of one sampled allocation (capture + record, at 32 frames) per unwinder.
//! 3. The time to dump 100,000 live samples, raw and symbolized.
//!
//! `CHURN_ALLOCATIONS` (per thread) and `CHURN_ROUNDS` override the defaults.

#[path = "support/workload.rs"]
mod workload;

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

fn main() {
    match std::env::var("CHURN_MODE").as_deref() {
        Ok("churn") => {
            let per_thread: usize = std::env::var("CHURN_ALLOCATIONS").unwrap().parse().unwrap();
            let cpu_before = workload::cpu_time();
            let elapsed = workload::churn(2, per_thread);
            let cpu = workload::cpu_time() - cpu_before;
            let stats = jeprof_shim::stats();
            println!("elapsed_ns {}", elapsed.as_nanos());
            println!("cpu_ns {}", cpu.as_nanos());
            println!("samples {}", stats.samples_taken);
            println!("unwinder {:?}", stats.unwinder);
        }
        Ok("sample-cost") => sample_cost(),
        Ok("dump") => dump_time(),
        _ => drive(),
    }
}

/// The `churn_plain` helper built beside this binary.
fn plain_binary() -> Option<PathBuf> {
    let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(&dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("churn_plain-") && !name.contains('.') {
            let modified = entry.metadata().ok()?.modified().ok()?;
            let newer = match &best {
                Some((t, _)) => modified > *t,
                None => true,
            };
            if newer {
                best = Some((modified, entry.path()));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// One way of running the churn: a binary and its environment.
struct Mode {
    name: &'static str,
    exe: Option<PathBuf>,
    env: Vec<(String, String)>,
}

impl Mode {
    fn new(name: &'static str, exe: Option<PathBuf>, env: Vec<(String, String)>) -> Mode {
        Mode { name, exe, env }
    }
}

fn run_child(exe: &PathBuf, env: &[(String, String)]) -> Result<Vec<(String, String)>, String> {
    let mut cmd = Command::new(exe);
    cmd.env_remove("JEPROF_SHIM")
        .env_remove("_RJEM_MALLOC_CONF");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || stderr.contains("Invalid conf") {
        return Err(stderr.trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

fn field(out: &[(String, String)], key: &str) -> Option<String> {
    out.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

fn drive() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let per_thread: usize = std::env::var("CHURN_ALLOCATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000);
    let rounds: usize = std::env::var("CHURN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let me = std::env::current_exe().unwrap();
    let plain = plain_binary();
    if plain.is_none() {
        println!("churn_plain not built: run `cargo bench -p jeprof-shim --bench churn --bench churn_plain`");
    }
    let churn = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
        let mut env = vec![
            ("CHURN_MODE".to_string(), "churn".to_string()),
            ("CHURN_ALLOCATIONS".to_string(), per_thread.to_string()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    };
    let modes = [
        Mode::new("jemalloc", plain.clone(), churn(&[])),
        Mode::new(
            "shim, sampling off",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:0")]),
        ),
        Mode::new(
            "shim, R=512KiB, fp",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:524288,unwinder:fp")]),
        ),
        Mode::new(
            "shim, R=512KiB, backtrace",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:524288,unwinder:backtrace")]),
        ),
        Mode::new(
            "shim, R=512KiB, auto",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:524288")]),
        ),
        Mode::new(
            "jemalloc prof, lg_prof_sample:19",
            plain.clone(),
            churn(&[("_RJEM_MALLOC_CONF", "prof:true,lg_prof_sample:19")]),
        ),
    ];
    println!(
        "2-thread churn: sizes 16-4096 B, {} live objects/thread, 2 x {per_thread} allocations; \
         {rounds} interleaved rounds; CPU time (user + system)",
        workload::LIVE_PER_THREAD
    );
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut notes: Vec<String> = vec![String::new(); modes.len()];
    for _ in 0..rounds {
        for (i, mode) in modes.iter().enumerate() {
            let Some(exe) = &mode.exe else { continue };
            match run_child(exe, &mode.env) {
                Ok(out) => {
                    if let Some(ns) = field(&out, "elapsed_ns") {
                        times[i].push(ns.parse::<f64>().unwrap() / 1e9);
                    }
                    if let Some(ns) = field(&out, "cpu_ns") {
                        cpu[i].push(ns.parse::<f64>().unwrap() / 1e9);
                    }
                    if let (Some(s), Some(u)) = (field(&out, "samples"), field(&out, "unwinder")) {
                        notes[i] = format!("{s} samples, unwinder {u}");
                    }
                }
                Err(e) => notes[i] = format!("unavailable: {}", e.lines().next().unwrap_or("")),
            }
        }
    }
    // Two summaries of the CPU-time ratio to plain jemalloc, both robust to other processes on a
    // shared machine in different ways: the ratio of each mode's fastest round to jemalloc's
    // fastest round, and the median over rounds of the ratio within a round (each mode runs right
    // after jemalloc in every round, so a disturbance that lasts a round affects both alike).
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    println!(
        "{:<34} {:>10} {:>10} {:>11} {:>13}  notes",
        "mode", "min wall s", "min cpu s", "ratio (min)", "ratio (paired)"
    );
    for (i, Mode { name, .. }) in modes.iter().enumerate() {
        if cpu[i].is_empty() {
            println!(
                "{name:<34} {:>10} {:>10} {:>11} {:>13}  {}",
                "-", "-", "-", "-", notes[i]
            );
            continue;
        }
        let ratio_min = if cpu[0].is_empty() {
            "-".to_string()
        } else {
            format!("{:.3}x", min(&cpu[i]) / min(&cpu[0]))
        };
        // Pairs only make sense when both ran in every round (a failed run leaves a gap).
        let ratio_paired = if cpu[i].len() == rounds && cpu[0].len() == rounds {
            let paired: Vec<f64> = cpu[i].iter().zip(&cpu[0]).map(|(c, b)| c / b).collect();
            format!("{:.3}x", median(&paired).unwrap_or(f64::NAN))
        } else {
            "-".to_string()
        };
        println!(
            "{name:<34} {:>10.3} {:>10.3} {ratio_min:>11} {ratio_paired:>13}  {}",
            min(&times[i]),
            min(&cpu[i]),
            notes[i]
        );
    }

    println!(
        "\ncost of one sampled allocation (capture + record), 32 frames, every allocation sampled:"
    );
    for unwinder in ["fp", "backtrace"] {
        let env = vec![
            ("CHURN_MODE".to_string(), "sample-cost".to_string()),
            (
                "JEPROF_SHIM".to_string(),
                format!("sample_rate:1,max_frames:32,symbolize:false,unwinder:{unwinder}"),
            ),
        ];
        match run_child(&me, &env) {
            Ok(out) => println!(
                "  {unwinder:<10} {} ns per sampled allocation ({} ns unsampled), {} frames captured",
                field(&out, "sampled_ns").unwrap_or_default(),
                field(&out, "unsampled_ns").unwrap_or_default(),
                field(&out, "frames").unwrap_or_default(),
            ),
            Err(e) => println!("  {unwinder}: failed: {e}"),
        }
    }

    println!("\ndump of 100,000 live samples:");
    let env = vec![
        ("CHURN_MODE".to_string(), "dump".to_string()),
        ("JEPROF_SHIM".to_string(), "sample_rate:1".to_string()),
    ];
    match run_child(&me, &env) {
        Ok(out) => {
            for (k, v) in out {
                println!("  {k:<32} {v}");
            }
        }
        Err(e) => println!("  failed: {e}"),
    }
}

/// Recurses `depth` frames, then runs `f`.
#[inline(never)]
fn at_depth<R>(depth: usize, f: &mut dyn FnMut() -> R) -> R {
    if depth == 0 {
        return f();
    }
    let r = at_depth(depth - 1, f);
    black_box(depth);
    r
}

fn sample_cost() {
    const N: usize = 20_000;
    let mut kept: Vec<Box<[u8; 64]>> = Vec::with_capacity(2 * N);
    let time_batch = |kept: &mut Vec<Box<[u8; 64]>>| {
        at_depth(40, &mut || {
            let start = Instant::now();
            for _ in 0..N {
                kept.push(Box::new([1u8; 64]));
            }
            start.elapsed().as_nanos() as f64 / N as f64
        })
    };
    // Warm up (arena creation, table growth), then measure.
    time_batch(&mut kept);
    kept.clear();
    let before = jeprof_shim::stats().samples_taken;
    let sampled = time_batch(&mut kept);
    let taken = jeprof_shim::stats().samples_taken - before;
    let profile = jeprof_shim::snapshot();
    let frames = profile
        .stacks
        .iter()
        .map(|s| s.frames.len())
        .max()
        .unwrap_or(0);
    drop(profile);
    kept.clear();
    jeprof_shim::set_sample_rate(0);
    let unsampled = time_batch(&mut kept);
    println!("sampled_ns {:.0}", sampled);
    println!("unsampled_ns {:.0}", unsampled);
    println!("samples {taken}");
    println!("frames {frames}");
}

fn dump_time() {
    const LIVE: usize = 100_000;
    let mut kept: Vec<Box<[u8; 32]>> = Vec::with_capacity(LIVE);
    for i in 0..LIVE {
        // 64 distinct stacks.
        at_depth(4 + i % 64, &mut || kept.push(Box::new([2u8; 32])));
    }
    let stats = jeprof_shim::stats();
    println!("live_samples {}", stats.live_samples);
    println!("distinct_stacks {}", stats.distinct_stacks);
    jeprof_shim::configure("symbolize:false").unwrap();
    let mut buf = Vec::with_capacity(64 << 20);
    let start = Instant::now();
    jeprof_shim::dump_to(&mut buf).unwrap();
    println!("raw_dump_ms {:.1}", start.elapsed().as_secs_f64() * 1e3);
    println!("raw_dump_bytes {}", buf.len());
    jeprof_shim::configure("symbolize:true").unwrap();
    for pass in ["first", "second"] {
        buf.clear();
        let start = Instant::now();
        jeprof_shim::dump_to(&mut buf).unwrap();
        println!(
            "symbolized_dump_ms_{pass} {:.1}",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    let cost = jeprof_shim::stats().last_symbolization.unwrap_or_default();
    println!("symbolized_addresses {}", cost.addresses);
    println!("symbolizer_peak_bytes {}", cost.peak_bytes);
    println!("symbolizer_retained_bytes {}", cost.retained_bytes);
    println!("metadata_bytes {}", jeprof_shim::stats().metadata_bytes);
    black_box(kept);
}
