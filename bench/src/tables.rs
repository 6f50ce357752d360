//! The churn's tables, from what [`crate::runner::run`] measured.
//!
//! Two summaries of each mode's CPU time against plain jemalloc's, robust to other processes on a
//! shared machine in different ways: the ratio of the fastest rounds, and the median over rounds
//! of the ratio within a round, with a 95% bootstrap interval ([`crate::stats`]).

use std::fmt::Write;

use crate::runner::{Measurements, Plan};
use crate::stats::{self, Xorshift};

/// `[low, high]` with `digits` decimals, or `-`.
fn interval(v: Option<(f64, f64)>, digits: usize) -> String {
    v.map_or_else(
        || "-".to_string(),
        |(lo, hi)| format!("[{lo:.digits$}, {hi:.digits$}]"),
    )
}

/// What a mode's child said about itself: samples and unwinder (the shim), whether jemalloc's
/// profiler ran (plain jemalloc).
fn notes(m: &Measurements, i: usize) -> String {
    let Some(out) = &m.last_output[i] else {
        return "no successful run".to_string();
    };
    let mut notes = Vec::new();
    if let (Some(s), Some(u)) = (out.get("samples"), out.get("unwinder")) {
        notes.push(format!("{s} samples, unwinder {u}"));
    }
    if out.get("jemalloc_prof") == Some("true") {
        let lg = out.get("lg_prof_sample").unwrap_or("?");
        notes.push(format!("jemalloc profiling, lg_prof_sample {lg}"));
    }
    notes.join("; ")
}

/// The one-line description of the run.
pub fn header(plan: &Plan) -> String {
    if let Some(args) = &plan.workload {
        return format!(
            "workload `{}`, one thread; {} interleaved rounds; CPU time (user + system) of the \
             whole process while it runs\n",
            args.join(" "),
            plan.rounds
        );
    }
    let c = &plan.churn;
    let measured = if c.warmup == 0 {
        "CPU time (user + system) of the whole process".to_string()
    } else {
        format!(
            "after a warm-up of {} allocations per thread (samples counted include it), the \
             threads' own CPU time",
            c.warmup
        )
    };
    format!(
        "{}-thread churn: sizes {}-{} B, {} live objects/thread, {} x {} allocations; {} \
         interleaved rounds; {measured}\n",
        c.threads,
        crate::workload::MIN_SIZE,
        crate::workload::MAX_SIZE,
        crate::workload::LIVE_PER_THREAD,
        c.threads,
        c.allocations,
        plan.rounds,
    )
}

/// The main table: per mode, fastest wall and CPU seconds, the ratio of fastest rounds, the
/// paired median ratio with its interval, and the child's notes.
pub fn ratios(plan: &Plan, m: &Measurements, rng: &mut Xorshift) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<40} {:>10} {:>10} {:>11} {:>14} {:>17}  notes",
        "mode", "min wall s", "min cpu s", "ratio (min)", "ratio (paired)", "95% interval"
    );
    for (i, entry) in plan.entries.iter().enumerate() {
        let base = entry.baseline;
        let paired = stats::paired_ratios(&m.cpu[i], &m.cpu[base]);
        let name = entry.mode.label();
        let (Some(median), Some(wall), Some(cpu), Some(base_cpu)) = (
            stats::median(&paired),
            stats::fastest(&m.wall[i]),
            stats::fastest(&m.cpu[i]),
            stats::fastest(&m.cpu[base]),
        ) else {
            let _ = writeln!(
                s,
                "{name:<40} {:>10} {:>10} {:>11} {:>14} {:>17}  {}",
                "-",
                "-",
                "-",
                "-",
                "-",
                notes(m, i)
            );
            continue;
        };
        let _ = writeln!(
            s,
            "{name:<40} {wall:>10.3} {cpu:>10.3} {:>10.3}x {median:>13.3}x {:>17}  {}",
            cpu / base_cpu,
            interval(stats::bootstrap_median_interval(&paired, rng), 3),
            notes(m, i)
        );
    }
    s
}

/// With several code layouts: per mode, the geometric mean over layouts of each layout's paired
/// ratio per round (rounds where every layout's pair ran), its median over rounds with a 95%
/// bootstrap interval, and the range of the per-layout medians: what code placement alone moves.
/// Empty without layouts.
pub fn layout_means(plan: &Plan, m: &Measurements, rng: &mut Xorshift) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for e in &plan.entries {
        if e.mode.layout.is_some() && !e.mode.is_baseline() && !keys.contains(&e.mode.key.as_str())
        {
            keys.push(&e.mode.key);
        }
    }
    if keys.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\naveraged over code layouts (per round the geometric mean over layouts of each layout's \
         paired ratio, then the median over rounds; last column: lowest and highest per-layout \
         median):"
    );
    let _ = writeln!(
        s,
        "{:<40} {:>7} {:>14} {:>17} {:>13}",
        "mode", "layouts", "ratio (paired)", "95% interval", "layout range"
    );
    for key in keys {
        let members: Vec<usize> = (0..plan.entries.len())
            .filter(|&i| plan.entries[i].mode.key == key)
            .collect();
        let description = &plan.entries[members[0]].mode.description;
        let pairs: Vec<(&stats::Series, &stats::Series)> = members
            .iter()
            .map(|&i| (&m.cpu[i][..], &m.cpu[plan.entries[i].baseline][..]))
            .collect();
        let per_round = stats::layout_means_per_round(&pairs);
        let medians: Vec<f64> = pairs
            .iter()
            .filter_map(|(mode, base)| stats::median(&stats::paired_ratios(mode, base)))
            .collect();
        let lowest = medians.iter().copied().reduce(f64::min);
        let highest = medians.iter().copied().reduce(f64::max);
        let (Some(median), Some(lowest), Some(highest)) =
            (stats::median(&per_round), lowest, highest)
        else {
            let _ = writeln!(s, "{description:<40} {:>7} {:>14}", members.len(), "-");
            continue;
        };
        let _ = writeln!(
            s,
            "{description:<40} {:>7} {median:>13.3}x {:>17} {:>13}",
            members.len(),
            interval(stats::bootstrap_median_interval(&per_round, rng), 3),
            format!("{lowest:.3}-{highest:.3}"),
        );
    }
    s
}

/// The one-time set-up per process: each mode's CPU time on the tiny churn over plain jemalloc's
/// in the same round (the sampled arena and its slabs, jemalloc's `mallctl` tables, thread caches,
/// the unwinder's first use: mostly page faults), what share of a timed run that is, and the
/// paired ratio without it, which is what the mode costs per allocation in a long-running
/// process. Empty when the plan measured no set-up.
pub fn setup(plan: &Plan, m: &Measurements, rng: &mut Xorshift) -> String {
    let Some(setup_allocations) = plan.setup_allocations else {
        return String::new();
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\none-time set-up per process (tiny churn, {} x {setup_allocations} allocations, CPU over \
         plain jemalloc in the same round):",
        plan.churn.threads
    );
    let _ = writeln!(
        s,
        "{:<40} {:>9} {:>17} {:>13} {:>17}",
        "mode", "extra ms", "95% interval", "share of run", "ratio without it"
    );
    for (i, entry) in plan.entries.iter().enumerate() {
        let base = entry.baseline;
        if base == i {
            continue;
        }
        let name = entry.mode.label();
        let base_cpu: Vec<f64> = m.cpu[base].iter().flatten().copied().collect();
        let extra_ms = stats::paired(&m.setup_cpu[i], &m.setup_cpu[base], |c, b| (c - b) * 1e3);
        let paired = stats::paired_ratios(&m.cpu[i], &m.cpu[base]);
        let (Some(base_run), Some(extra), Some(ratio)) = (
            stats::median(&base_cpu),
            stats::median(&extra_ms),
            stats::median(&paired),
        ) else {
            let _ = writeln!(s, "{name:<40} {:>9}", "-");
            continue;
        };
        let share = extra / 1e3 / base_run;
        let _ = writeln!(
            s,
            "{name:<40} {extra:>9.2} {:>17} {:>12.2}% {:>16.3}x",
            interval(stats::bootstrap_median_interval(&extra_ms, rng), 2),
            share * 100.0,
            ratio - share,
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::{select, Binaries};
    use crate::runner::{entries, ChildOutput};
    use crate::workload::Churn;
    use std::path::{Path, PathBuf};

    fn plan(keys: &[&str], layouts: &[&str]) -> Plan {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let layouts: Vec<(String, PathBuf)> = layouts
            .iter()
            .map(|l| (l.to_string(), PathBuf::from(l)))
            .collect();
        Plan {
            entries: entries(
                &select(Some(&keys), &[]).unwrap(),
                &Binaries::in_dir(Path::new("/x")),
                &layouts,
            ),
            workload: None,
            churn: Churn {
                threads: 2,
                allocations: 100,
                warmup: 0,
            },
            setup_allocations: Some(10),
            rounds: 3,
            seed: 1,
            progress: false,
        }
    }

    fn measured(cpu: Vec<Vec<Option<f64>>>, setup: Vec<Vec<Option<f64>>>) -> Measurements {
        Measurements {
            wall: cpu.clone(),
            last_output: vec![Some(ChildOutput::default()); cpu.len()],
            cpu,
            setup_cpu: setup,
            failures: Vec::new(),
        }
    }

    #[test]
    fn ratio_row_is_the_median_of_the_rounds_ratios_to_the_baseline() {
        let p = plan(&["off"], &[]);
        // Ratios 1.1, 1.2, 1.5 by round: median 1.2, though the fastest runs give 1.1 / 1.0.
        let m = measured(
            vec![
                vec![Some(1.0), Some(2.0), Some(1.0)],
                vec![Some(1.1), Some(2.4), Some(1.5)],
            ],
            vec![vec![None; 3]; 2],
        );
        let table = ratios(&p, &m, &mut Xorshift::new(1));
        let row = table
            .lines()
            .find(|l| l.starts_with("shim, sampling off"))
            .unwrap();
        assert!(row.contains("1.100x") && row.contains("1.200x"), "{row}");
    }

    #[test]
    fn setup_row_takes_the_setup_share_off_the_ratio() {
        let p = plan(&["fp"], &[]);
        // Set-up: 0.5 ms more than jemalloc every round; a run of jemalloc takes 0.1 s, so the
        // set-up is 0.5% of it and the ratio 1.05 becomes 1.045 without it.
        let m = measured(
            vec![vec![Some(0.1); 3], vec![Some(0.105); 3]],
            vec![vec![Some(0.0010); 3], vec![Some(0.0015); 3]],
        );
        let table = setup(&p, &m, &mut Xorshift::new(1));
        let row = table
            .lines()
            .find(|l| l.starts_with("shim, R=512KiB, fp"))
            .unwrap();
        assert!(
            row.contains("0.50") && row.contains("0.50%") && row.contains("1.045x"),
            "{row}"
        );
    }

    #[test]
    fn layout_table_averages_layouts_geometrically() {
        let p = plan(&["off"], &["a", "b"]);
        // Layout a: off at 1.5 of its jemalloc; layout b: 1.92 / 2.0 = 0.96. Their geometric
        // mean is sqrt(1.44) = 1.2 every round (the arithmetic one would be 1.23).
        let m = measured(
            vec![
                vec![Some(1.0); 3],
                vec![Some(1.5); 3],
                vec![Some(2.0); 3],
                vec![Some(1.92); 3],
            ],
            vec![vec![None; 3]; 4],
        );
        let table = layout_means(&p, &m, &mut Xorshift::new(1));
        let row = table
            .lines()
            .find(|l| l.starts_with("shim, sampling off"))
            .unwrap();
        assert!(
            row.contains("1.200x") && row.contains("0.960-1.500"),
            "{row}"
        );
    }

    #[test]
    fn a_mode_without_successful_runs_gets_a_dash_not_a_figure() {
        let p = plan(&["off"], &[]);
        let mut m = measured(
            vec![vec![Some(1.0); 3], vec![None; 3]],
            vec![vec![None; 3]; 2],
        );
        m.last_output[1] = None;
        let table = ratios(&p, &m, &mut Xorshift::new(1));
        let row = table
            .lines()
            .find(|l| l.starts_with("shim, sampling off"))
            .unwrap();
        assert!(
            row.contains("no successful run") && !row.contains('x'),
            "{row}"
        );
    }
}
