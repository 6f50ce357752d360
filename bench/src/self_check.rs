//! The churn's quick self-check: every mode, the layout averaging, the sample cost and the dump
//! on a tiny workload, in a few seconds, failing when a child fails, prints nothing, or reports
//! something its mode rules out (samples with sampling off, no samples with it on, jemalloc's
//! profiler off in its own mode). It checks that the bench still runs, not what anything costs.

use std::path::PathBuf;

use crate::modes::{self, Binaries, Binary};
use crate::runner::{self, ChildOutput, Measurements, Plan};
use crate::stats::Xorshift;
use crate::tables;
use crate::workload::Churn;

/// Allocations per thread in the self-check's churn: at R = 512 KiB and 2 KiB per allocation on
/// average, about 16 samples per thread, enough that a sampling mode with none is a failure.
pub const ALLOCATIONS: u64 = 4_000;

/// What the self-check printed, or every problem it found (with what it printed up to then).
pub type Outcome = Result<String, (String, Vec<String>)>;

/// Runs the self-check with `binaries`.
pub fn run(binaries: &Binaries) -> Outcome {
    let mut report = String::new();
    let mut problems = Vec::new();
    let mut rng = Xorshift::new(1);

    // Every mode, plus one extra period, twice, with the set-up churn.
    let all = modes::select(None, &[65_536]).expect("the table's own keys");
    let plan = Plan {
        entries: runner::entries(&all, binaries, &[]),
        workload: None,
        churn: Churn {
            threads: 2,
            allocations: ALLOCATIONS,
            warmup: 0,
        },
        setup_allocations: Some(500),
        rounds: 2,
        seed: 1,
        progress: false,
    };
    let m = runner::run(&plan);
    report.push_str(&tables::header(&plan));
    report.push_str(&tables::ratios(&plan, &m, &mut rng));
    report.push_str(&tables::setup(&plan, &m, &mut rng));
    problems.extend(m.failures.iter().cloned());
    problems.extend(check_modes(&plan, &m));

    // Two stand-in layouts (links to the same binaries) and a warm-up: the layout table and the
    // threads' own CPU clocks.
    match stand_in_layouts(binaries) {
        Ok((_dir, layouts)) => {
            let keys = ["again".to_string(), "fp".to_string()];
            let some = modes::select(Some(&keys), &[]).expect("the table's own keys");
            let plan = Plan {
                entries: runner::entries(&some, binaries, &layouts),
                workload: None,
                churn: Churn {
                    threads: 2,
                    allocations: ALLOCATIONS / 2,
                    warmup: ALLOCATIONS / 2,
                },
                setup_allocations: None,
                rounds: 1,
                seed: 2,
                progress: false,
            };
            let m = runner::run(&plan);
            report.push('\n');
            report.push_str(&tables::header(&plan));
            report.push_str(&tables::ratios(&plan, &m, &mut rng));
            let means = tables::layout_means(&plan, &m, &mut rng);
            report.push_str(&means);
            problems.extend(m.failures.iter().cloned());
            problems.extend(check_modes(&plan, &m));
            if !means
                .lines()
                .any(|l| l.contains("R=512KiB") && l.contains('x'))
            {
                problems.push("the layout table has no figure for fp".to_string());
            }
        }
        Err(e) => problems.push(format!("stand-in layouts: {e}")),
    }

    report.push_str("\nsample cost (every allocation sampled, 500 allocations):\n");
    for unwinder in ["fp", "eh_frame", "backtrace"] {
        match runner::sample_cost(&binaries.shim, unwinder, 500) {
            Ok(out) => {
                report.push_str(&format!("  {unwinder}: {}\n", line(&out)));
                let samples = out.number("samples").unwrap_or(0.0);
                if out.number("sampled_ns").is_none() || samples < 500.0 {
                    problems.push(format!(
                        "sample cost, {unwinder}: expected sampled_ns and 500 samples, got {}",
                        line(&out)
                    ));
                }
            }
            Err(e) => problems.push(format!("sample cost, {unwinder}: {e}")),
        }
    }

    let workloads: [(&str, &[&str]); 2] = [
        (
            "log pipeline (2,000 lines, 200 queries)",
            &["log-index", "--lines", "2000", "--queries", "200"],
        ),
        (
            "key-value store (5,000 operations, 500 keys)",
            &["kv-store", "--operations", "5000", "--keys", "500"],
        ),
    ];
    let shim_env = vec![(
        "JEPROF_SHIM".to_string(),
        "sample_rate:4096,unwinder:eh_frame".to_string(),
    )];
    for (name, args) in workloads {
        report.push_str(&format!("\n{name}, each child:\n"));
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        match (
            runner::run_child(&binaries.plain, &args, &[]),
            runner::run_child(&binaries.shim, &args, &shim_env),
        ) {
            (Ok(plain), Ok(shim)) => {
                report.push_str(&format!(
                    "  plain: {}\n  shim: {}\n",
                    line(&plain),
                    line(&shim)
                ));
                // The same work under both allocators, and the shim sampled it.
                if plain.get("checksum").is_none() || plain.get("checksum") != shim.get("checksum")
                {
                    problems.push(format!(
                        "{name}: checksums differ: {} vs {}",
                        line(&plain),
                        line(&shim)
                    ));
                }
                if shim.number("samples").unwrap_or(0.0) < 10.0 {
                    problems.push(format!("{name}: too few samples: {}", line(&shim)));
                }
                // The paired CPU-time rounds (`--workload`) read these.
                for out in [&plain, &shim] {
                    if out.number("cpu_ns").is_none() || out.number("elapsed_ns").is_none() {
                        problems.push(format!("{name}: no cpu_ns/elapsed_ns: {}", line(out)));
                    }
                }
            }
            (Err(e), _) | (_, Err(e)) => problems.push(format!("{name}: {e}")),
        }
    }

    report.push_str("\ndump of 2,000 live samples:\n");
    match runner::dump(&binaries.shim, 2_000) {
        Ok(out) => {
            report.push_str(&format!("  {}\n", line(&out)));
            let live = out.number("live_samples").unwrap_or(0.0);
            let symbolized = out.number("symbolized_dump_bytes").unwrap_or(0.0);
            if live < 2_000.0 || symbolized <= 0.0 {
                problems.push(format!(
                    "dump: expected 2,000 live samples and a symbolized dump, got {}",
                    line(&out)
                ));
            }
        }
        Err(e) => problems.push(format!("dump: {e}")),
    }

    if problems.is_empty() {
        Ok(report)
    } else {
        Err((report, problems))
    }
}

/// `key value` pairs on one line.
fn line(out: &ChildOutput) -> String {
    if out.0.is_empty() {
        return "(nothing)".to_string();
    }
    out.0
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What each mode's child must have said about itself, given its settings.
fn check_modes(plan: &Plan, m: &Measurements) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, entry) in plan.entries.iter().enumerate() {
        let label = entry.mode.label();
        let Some(out) = &m.last_output[i] else {
            // Its failures are already listed.
            continue;
        };
        let setting = |var: &str| {
            entry
                .mode
                .env
                .iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
        };
        match entry.mode.binary {
            Binary::Shim => {
                let conf = setting("JEPROF_SHIM").unwrap_or_default();
                let samples = out.number("samples");
                let sampling = !conf.contains("sample_rate:0");
                match samples {
                    None => problems.push(format!("{label}: printed no sample count")),
                    Some(s) if sampling && s == 0.0 => {
                        problems.push(format!("{label}: sampling on ({conf}) but no samples"))
                    }
                    Some(s) if !sampling && s > 0.0 => {
                        problems.push(format!("{label}: sampling off but {s} samples"))
                    }
                    Some(_) => {}
                }
                let unwinder = out.get("unwinder").unwrap_or("");
                let expected = if conf.contains("unwinder:fp") {
                    Some("FramePointer")
                } else if conf.contains("unwinder:backtrace") {
                    Some("Backtrace")
                } else if conf.contains("unwinder:eh_frame") {
                    Some("EhFrame")
                } else {
                    None
                };
                if expected.is_some_and(|e| e != unwinder) {
                    problems.push(format!(
                        "{label}: unwinder {unwinder:?}, expected {expected:?}"
                    ));
                }
            }
            Binary::Plain => {
                let wants_prof =
                    setting("_RJEM_MALLOC_CONF").is_some_and(|c| c.contains("prof:true"));
                let prof = out.get("jemalloc_prof") == Some("true");
                if wants_prof != prof {
                    problems.push(format!(
                        "{label}: jemalloc's profiler {} (jemalloc_prof {:?})",
                        if wants_prof { "did not run" } else { "ran" },
                        out.get("jemalloc_prof")
                    ));
                }
            }
        }
    }
    problems
}

/// A temporary directory with two layouts linking to `binaries`, and the layouts found in it.
fn stand_in_layouts(
    binaries: &Binaries,
) -> std::io::Result<(tempfile::TempDir, Vec<(String, PathBuf)>)> {
    let dir = tempfile::tempdir()?;
    for name in ["layout-1", "layout-2"] {
        let layout = dir.path().join(name);
        std::fs::create_dir(&layout)?;
        for binary in [Binary::Plain, Binary::Shim] {
            let target = std::fs::canonicalize(binaries.path(binary))?;
            std::os::unix::fs::symlink(target, layout.join(binary.file_name()))?;
        }
    }
    let found = runner::layouts(dir.path());
    Ok((dir, found))
}
