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
//!    9 rounds (in a new random order each round), and each mode's CPU time is compared with plain
//!    jemalloc's two ways: fastest round to fastest round, and the median of the per-round ratios
//!    with a 95% bootstrap interval. Plain jemalloc runs twice per round: the second row is the
//!    noise floor, the ratio between two identical runs, against which the others are read.
//! 2. The cost of one sampled allocation (capture + record, at 32 frames) per unwinder.
//! 3. The time to dump 100,000 live samples, raw and symbolized.
//!
//! Every round also runs each mode once more on a tiny churn (`CHURN_SETUP_ALLOCATIONS`, default
//! 2 × 2,000 allocations, about 16 samples): its CPU time over plain jemalloc's in the same round is
//! the mode's one-time set-up per process (the sampled arena and its slabs, jemalloc's `mallctl`
//! tables, thread caches and tables, the unwinder's first use), mostly page faults. A ratio above
//! includes it once; the table shows what share of the run that is, and the ratio without it, which
//! is what the shim costs per allocation in a long-running process.
//!
//! `CHURN_ALLOCATIONS` (per thread) and `CHURN_ROUNDS` override the defaults. `CHURN_MODES` (a
//! comma-separated list of `again`, `off`, `fp`, `backtrace`, `auto`, `jemalloc-prof`) runs only
//! those churn modes besides plain jemalloc, and only the churn.
//!
//! `CHURN_RATES` (a comma-separated list of periods in bytes) adds the frame-pointer mode at each of
//! those sampling periods, so the cost per sample and what remains with almost no samples can be
//! read off the rows:
//!
//! ```text
//! CHURN_MODES=off,fp CHURN_RATES=131072,2097152,67108864 CHURN_ROUNDS=600 \
//!   CHURN_ALLOCATIONS=2000000 RUSTFLAGS="-C force-frame-pointers=yes" \
//!   cargo bench -p jeprof-shim --bench churn --bench churn_plain
//! ```
//!
//! `CHURN_WARMUP` (allocations per thread) runs that many allocations first in every child, and
//! then times only what follows, with each thread's own CPU clock: one-time costs (the sampled
//! arena, tables, caches, page faults) fall in the warm-up, so the ratios are the cost per
//! allocation of a long-running process. The set-up table then shows about nothing.
//!
//! `CHURN_LAYOUTS=DIR` runs every mode with each code layout's binaries under `DIR` (built by
//! `benches/build-layouts.sh N DIR`, which relinks this bench's two binaries with lld's
//! `--shuffle-sections`), takes each ratio against plain jemalloc of the same layout, and adds a
//! table averaged over the layouts: one pair of binaries is one draw of code placement, which moves
//! this churn by percents.
//!
//! On a shared machine, many short rounds pin the ratios down far better than a few long ones:
//! with `CHURN_MODES=again,off,fp CHURN_ROUNDS=2000 CHURN_ALLOCATIONS=2000000` (about 12 minutes)
//! the intervals are about ±0.4%.

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
            workload::run_and_report(2, per_thread, || {});
            let stats = jeprof_shim::stats();
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
#[derive(Clone)]
struct Mode {
    name: String,
    exe: Option<PathBuf>,
    env: Vec<(String, String)>,
    /// Runs the `churn_plain` binary (plain jemalloc), not the shim.
    plain: bool,
    /// The code layout it was linked with (`CHURN_LAYOUTS`), or none: the binaries cargo built.
    layout: Option<String>,
}

impl Mode {
    /// The mode's name, with its layout where it has one.
    fn label(&self) -> String {
        match &self.layout {
            Some(layout) => format!("{} [{layout}]", self.name),
            None => self.name.clone(),
        }
    }
}

/// The layouts under `dir` (`CHURN_LAYOUTS`): every subdirectory holding both a `churn` and a
/// `plain` binary, by name.
fn layouts(dir: &str) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("churn").is_file() && path.join("plain").is_file())
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                path,
            )
        })
        .collect();
    found.sort();
    found
}

/// xorshift64*: the bench's own generator, for the run order of each round and the bootstrap.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A 95% interval for the median of `v` by the percentile bootstrap: the 2.5th and 97.5th
/// percentiles of the medians of 1,000 resamples of `v` with replacement. The ratios of one round
/// are not normal (a disturbed round gives an outlier), and the median and the bootstrap do not
/// assume they are.
fn bootstrap_median_interval(v: &[f64], rng: &mut Xorshift) -> (f64, f64) {
    const RESAMPLES: usize = 1000;
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let resample: Vec<f64> = (0..v.len()).map(|_| v[rng.below(v.len())]).collect();
            median(&resample)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    (
        medians[RESAMPLES / 40],
        medians[RESAMPLES - 1 - RESAMPLES / 40],
    )
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

/// A child's `*_ns` figure in seconds.
fn seconds(out: &[(String, String)], key: &str) -> Option<f64> {
    field(out, key)
        .and_then(|ns| ns.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
}

/// `env` with `CHURN_ALLOCATIONS` set to `per_thread`.
fn with_allocations(env: &[(String, String)], per_thread: usize) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| match k.as_str() {
            "CHURN_ALLOCATIONS" => (k.clone(), per_thread.to_string()),
            _ => (k.clone(), v.clone()),
        })
        .collect()
}

/// `f(mode, plain)` for every round where both ran.
fn paired_with(
    mode: &[Option<f64>],
    plain: &[Option<f64>],
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    mode.iter()
        .zip(plain)
        .filter_map(|(c, b)| Some(f((*c)?, (*b)?)))
        .collect()
}

fn drive() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let per_thread = workload::env_count("CHURN_ALLOCATIONS", 20_000_000);
    let setup_per_thread = workload::env_count("CHURN_SETUP_ALLOCATIONS", 2_000);
    let rounds = workload::env_count("CHURN_ROUNDS", 9);
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
    let all_modes = vec![
        ("jemalloc", "jemalloc", plain.clone(), churn(&[])),
        // The same binary and settings again: how far apart two identical runs land on this
        // machine, so every other row's ratio can be read against it.
        (
            "again",
            "jemalloc again (noise floor)",
            plain.clone(),
            churn(&[]),
        ),
        (
            "off",
            "shim, sampling off",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:0")]),
        ),
        (
            "fp",
            "shim, R=512KiB, fp",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:524288,unwinder:fp")]),
        ),
        (
            "backtrace",
            "shim, R=512KiB, backtrace",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:524288,unwinder:backtrace")]),
        ),
        (
            "auto",
            "shim, R=512KiB, auto",
            Some(me.clone()),
            churn(&[("JEPROF_SHIM", "sample_rate:524288")]),
        ),
        (
            "jemalloc-prof",
            "jemalloc prof, lg_prof_sample:19",
            plain.clone(),
            churn(&[("_RJEM_MALLOC_CONF", "prof:true,lg_prof_sample:19")]),
        ),
    ];
    // Plain jemalloc always runs: it is what every ratio is taken against.
    let wanted = std::env::var("CHURN_MODES").ok();
    let mut modes: Vec<Mode> = all_modes
        .into_iter()
        .filter(|(key, ..)| {
            *key == "jemalloc"
                || wanted
                    .as_deref()
                    .is_none_or(|w| w.split(',').any(|k| k.trim() == *key))
        })
        .map(|(_, name, exe, env)| Mode {
            name: name.to_string(),
            plain: exe == plain,
            exe,
            env,
            layout: None,
        })
        .collect();
    // The frame-pointer mode again at each period listed: how the cost grows with the number of
    // samples, and what is left of it with almost none.
    for rate in std::env::var("CHURN_RATES").unwrap_or_default().split(',') {
        let rate = rate.trim();
        if rate.is_empty() {
            continue;
        }
        match rate.parse::<u64>() {
            Ok(rate) if rate > 0 => modes.push(Mode {
                name: format!("shim, R={rate} B, fp"),
                exe: Some(me.clone()),
                env: churn(&[("JEPROF_SHIM", &format!("sample_rate:{rate},unwinder:fp"))]),
                plain: false,
                layout: None,
            }),
            _ => println!(
                "CHURN_RATES: {rate:?} is not a period in bytes (a whole number > 0); skipped"
            ),
        }
    }
    // Every mode again with each code layout's binaries (`benches/build-layouts.sh`): each ratio is
    // then taken against plain jemalloc of the same layout, and averaged over the layouts.
    if let Ok(dir) = std::env::var("CHURN_LAYOUTS") {
        let found = layouts(&dir);
        if found.is_empty() {
            eprintln!(
                "CHURN_LAYOUTS: {dir:?} holds no layout (a subdirectory with `churn` and `plain`); \
                 build some with shim/benches/build-layouts.sh"
            );
            std::process::exit(2);
        }
        modes = found
            .iter()
            .flat_map(|(label, path)| {
                modes.iter().map(move |mode| Mode {
                    exe: mode
                        .exe
                        .as_ref()
                        .map(|_| path.join(if mode.plain { "plain" } else { "churn" })),
                    layout: Some(label.clone()),
                    ..mode.clone()
                })
            })
            .collect();
    }
    // Each mode's baseline: plain jemalloc of the same layout (the first mode of its layout).
    let baseline: Vec<usize> = modes
        .iter()
        .map(|mode| {
            modes
                .iter()
                .position(|m| m.layout == mode.layout)
                .expect("a mode's own layout")
        })
        .collect();
    let warmup = workload::warmup();
    let measured = if warmup == 0 {
        "CPU time (user + system)".to_string()
    } else {
        format!(
            "after a warm-up of {warmup} allocations per thread (samples counted include it), \
             the threads' own CPU time"
        )
    };
    println!(
        "2-thread churn: sizes 16-4096 B, {} live objects/thread, 2 x {per_thread} allocations; \
         {rounds} interleaved rounds; {measured}",
        workload::LIVE_PER_THREAD
    );
    // Per mode and round: wall and CPU seconds (None where the run failed).
    let mut times: Vec<Vec<Option<f64>>> = vec![vec![None; rounds]; modes.len()];
    let mut cpu: Vec<Vec<Option<f64>>> = vec![vec![None; rounds]; modes.len()];
    // CPU seconds of the tiny churn, per mode and round.
    let mut setup_cpu: Vec<Vec<Option<f64>>> = vec![vec![None; rounds]; modes.len()];
    let mut notes: Vec<String> = vec![String::new(); modes.len()];
    // The sampled path's latency (alloc, free, empty clock pair), per mode and round, where the
    // child reports it (`path-latency` builds).
    let mut latency: Vec<Vec<Option<[f64; 3]>>> = vec![vec![None; rounds]; modes.len()];
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
    let mut order: Vec<usize> = (0..modes.len()).collect();
    for round in 0..rounds {
        // A new random order every round, so no mode always runs right after another (a machine
        // that slows down or speeds up within a round would otherwise favour a fixed position).
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        if rounds >= 50 && round % (rounds / 10) == 0 {
            eprintln!("round {round}/{rounds}");
        }
        for &i in &order {
            let mode = &modes[i];
            let Some(exe) = &mode.exe else { continue };
            match run_child(exe, &mode.env) {
                Ok(out) => {
                    times[i][round] = seconds(&out, "elapsed_ns");
                    cpu[i][round] = seconds(&out, "cpu_ns");
                    let ns = |key| field(&out, key).and_then(|v| v.parse::<f64>().ok());
                    latency[i][round] = ns("path_alloc_ns")
                        .zip(ns("path_free_ns"))
                        .zip(ns("path_clock_ns"))
                        .map(|((a, f), c)| [a, f, c]);
                    if let (Some(s), Some(u)) = (field(&out, "samples"), field(&out, "unwinder")) {
                        notes[i] = format!("{s} samples, unwinder {u}");
                    }
                }
                Err(e) => notes[i] = format!("unavailable: {}", e.lines().next().unwrap_or("")),
            }
            if let Ok(out) = run_child(exe, &with_allocations(&mode.env, setup_per_thread)) {
                setup_cpu[i][round] = seconds(&out, "cpu_ns");
            }
        }
    }
    // Two summaries of the CPU-time ratio to plain jemalloc, both robust to other processes on a
    // shared machine in different ways: the ratio of each mode's fastest round to jemalloc's
    // fastest round, and the median over rounds of the ratio within a round (a disturbance that
    // lasts a round affects both alike), with a 95% bootstrap interval for that median.
    let min = |v: &[Option<f64>]| v.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    println!(
        "{:<34} {:>10} {:>10} {:>11} {:>13} {:>17}  notes",
        "mode", "min wall s", "min cpu s", "ratio (min)", "ratio (paired)", "95% interval"
    );
    // Per mode: the CPU ratio to plain jemalloc (of its layout) in every round where both ran.
    let paired: Vec<Vec<f64>> = cpu
        .iter()
        .zip(&baseline)
        .map(|(mode, &base)| paired_with(mode, &cpu[base], |c, b| c / b))
        .collect();
    for (i, mode) in modes.iter().enumerate() {
        let name = mode.label();
        let paired = &paired[i];
        if paired.is_empty() {
            println!(
                "{name:<34} {:>10} {:>10} {:>11} {:>13} {:>17}  {}",
                "-", "-", "-", "-", "-", notes[i]
            );
            continue;
        }
        let (low, high) = bootstrap_median_interval(paired, &mut rng);
        println!(
            "{name:<34} {:>10.3} {:>10.3} {:>10.3}x {:>12.3}x {:>17}  {}",
            min(&times[i]),
            min(&cpu[i]),
            min(&cpu[i]) / min(&cpu[baseline[i]]),
            median(paired),
            format!("[{low:.3}, {high:.3}]"),
            notes[i]
        );
    }
    print_layout_means(&modes, &baseline, &cpu, &mut rng);

    // The one-time set-up, and the ratios without it.
    println!(
        "\none-time set-up per process (tiny churn, 2 x {setup_per_thread} allocations, CPU over \
         plain jemalloc in the same round):"
    );
    println!(
        "{:<34} {:>9} {:>17} {:>13} {:>17}",
        "mode", "extra ms", "95% interval", "share of run", "ratio without it"
    );
    for (i, mode) in modes.iter().enumerate() {
        let base = baseline[i];
        if base == i {
            continue;
        }
        let name = mode.label();
        let plain_cpu: Vec<f64> = cpu[base].iter().flatten().copied().collect();
        let plain_run = (!plain_cpu.is_empty()).then(|| median(&plain_cpu));
        let extra = paired_with(&setup_cpu[i], &setup_cpu[base], |c, b| (c - b) * 1e3);
        let paired = &paired[i];
        let Some(plain_run) = plain_run.filter(|_| !extra.is_empty() && !paired.is_empty()) else {
            println!("{name:<34} {:>9}", "-");
            continue;
        };
        let (low, high) = bootstrap_median_interval(&extra, &mut rng);
        let share = median(&extra) / 1e3 / plain_run;
        println!(
            "{name:<34} {:>9.2} {:>17} {:>12.2}% {:>16.3}x",
            median(&extra),
            format!("[{low:.2}, {high:.2}]"),
            share * 100.0,
            median(paired) - share,
        );
    }
    print_latency(&modes, &latency);
    if wanted.is_some() {
        return;
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

/// With several code layouts: per mode, the geometric mean over layouts of the paired ratios of each
/// round (rounds where every layout's pair ran), its median over rounds with a 95% bootstrap
/// interval, and the range of the per-layout medians: what code placement alone moves.
fn print_layout_means(
    modes: &[Mode],
    baseline: &[usize],
    cpu: &[Vec<Option<f64>>],
    rng: &mut Xorshift,
) {
    let mut names: Vec<&str> = Vec::new();
    for (i, mode) in modes.iter().enumerate() {
        if mode.layout.is_some() && baseline[i] != i && !names.contains(&mode.name.as_str()) {
            names.push(&mode.name);
        }
    }
    if names.is_empty() {
        return;
    }
    let rounds = cpu.first().map_or(0, Vec::len);
    println!(
        "\naveraged over code layouts (per round the geometric mean over layouts of each layout's \
         paired ratio, then the median over rounds; last column: lowest and highest per-layout \
         median):"
    );
    println!(
        "{:<34} {:>7} {:>14} {:>17} {:>17}",
        "mode", "layouts", "ratio (paired)", "95% interval", "layout range"
    );
    for name in names {
        let members: Vec<usize> = (0..modes.len())
            .filter(|&i| modes[i].name == name && baseline[i] != i)
            .collect();
        let per_round: Vec<f64> = (0..rounds)
            .filter_map(|r| {
                let logs: Option<Vec<f64>> = members
                    .iter()
                    .map(|&i| Some((cpu[i][r]? / cpu[baseline[i]][r]?).ln()))
                    .collect();
                let logs = logs?;
                Some((logs.iter().sum::<f64>() / logs.len() as f64).exp())
            })
            .collect();
        let medians: Vec<f64> = members
            .iter()
            .map(|&i| paired_with(&cpu[i], &cpu[baseline[i]], |c, b| c / b))
            .filter(|v| !v.is_empty())
            .map(|v| median(&v))
            .collect();
        if per_round.is_empty() || medians.is_empty() {
            println!("{name:<34} {:>7} {:>14}", members.len(), "-");
            continue;
        }
        let (low, high) = bootstrap_median_interval(&per_round, rng);
        let lowest = medians.iter().copied().fold(f64::INFINITY, f64::min);
        let highest = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "{name:<34} {:>7} {:>13.3}x {:>17} {:>17}",
            members.len(),
            median(&per_round),
            format!("[{low:.3}, {high:.3}]"),
            format!("{lowest:.3}-{highest:.3}"),
        );
    }
}

/// The sampled path's latency table (`path-latency` builds; nothing when no child reported it).
fn print_latency(modes: &[Mode], latency: &[Vec<Option<[f64; 3]>>]) {
    if latency.iter().flatten().all(Option::is_none) {
        return;
    }
    println!(
        "\nsampled path latency (mean per sample in a run, median over rounds; each timed path \
         includes one pair of clock readings, the clock column, which the last column takes off):"
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>16}",
        "mode", "alloc ns", "free ns", "clock ns", "alloc+free net"
    );
    for (mode, rounds) in modes.iter().zip(latency) {
        let runs: Vec<[f64; 3]> = rounds.iter().flatten().copied().collect();
        if runs.is_empty() {
            continue;
        }
        let column = |k: usize| median(&runs.iter().map(|r| r[k]).collect::<Vec<_>>());
        let net: Vec<f64> = runs.iter().map(|r| r[0] + r[1] - 2.0 * r[2]).collect();
        println!(
            "{:<34} {:>9.0} {:>9.0} {:>9.0} {:>16.0}",
            mode.label(),
            column(0),
            column(1),
            column(2),
            median(&net)
        );
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
