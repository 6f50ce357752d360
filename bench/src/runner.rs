//! Runs the modes: each as a child process, every round in a new random order, with each code
//! layout's binaries, and collects what the children print.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::modes::{Binaries, Mode};
use crate::stats::Xorshift;
use crate::workload::Churn;

/// What a child printed: its `key value` lines, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChildOutput(pub Vec<(String, String)>);

impl ChildOutput {
    /// Reads `key value` lines; other lines are ignored.
    pub fn parse(stdout: &str) -> Self {
        ChildOutput(
            stdout
                .lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(k, v)| (k.to_string(), v.trim().to_string()))
                .collect(),
        )
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key` as a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.get(key)?.parse().ok()
    }

    /// A `*_ns` value in seconds.
    pub fn seconds(&self, key: &str) -> Option<f64> {
        self.number(key).map(|ns| ns / 1e9)
    }
}

/// Runs `exe` with `args` and `env` (after clearing both profilers' variables, so the caller's
/// settings never leak into a mode) and reads what it printed. An error says why: the exit
/// status with the first line of stderr, or jemalloc rejecting its configuration (it only warns,
/// and would run without the profiler the mode is about).
pub fn run_child(
    exe: &Path,
    args: &[String],
    env: &[(String, String)],
) -> Result<ChildOutput, String> {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env_remove("JEPROF_SHIM")
        .env_remove("_RJEM_MALLOC_CONF");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first_line = stderr.lines().next().unwrap_or("").to_string();
    if !out.status.success() {
        return Err(format!("{} ({})", out.status, first_line));
    }
    if let Some(line) = stderr.lines().find(|l| l.contains("Invalid conf")) {
        return Err(line.to_string());
    }
    Ok(ChildOutput::parse(&String::from_utf8_lossy(&out.stdout)))
}

/// The arguments of a child's churn.
pub fn churn_args(churn: &Churn) -> Vec<String> {
    vec![
        "churn".into(),
        "--threads".into(),
        churn.threads.to_string(),
        "--allocations".into(),
        churn.allocations.to_string(),
        "--warmup".into(),
        churn.warmup.to_string(),
    ]
}

/// The code layouts under `dir`: every subdirectory holding both child binaries, by name.
pub fn layouts(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let b = Binaries::in_dir(path);
            b.plain.is_file() && b.shim.is_file()
        })
        .map(|path| {
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            (name, path)
        })
        .collect();
    found.sort();
    found
}

/// One mode with the binary it runs and the row of its baseline.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The mode.
    pub mode: Mode,
    /// The binary that runs it.
    pub exe: PathBuf,
    /// The index (in the plan) of plain jemalloc of the same layout, which its ratios are
    /// taken against.
    pub baseline: usize,
}

/// Every mode with `binaries`, or, with layouts, every mode with each layout's binaries (a ratio
/// is then taken against plain jemalloc of the same layout). `modes` must start with the
/// baseline ([`crate::modes::select`] does).
pub fn entries(modes: &[Mode], binaries: &Binaries, layouts: &[(String, PathBuf)]) -> Vec<Entry> {
    let builds: Vec<(Option<String>, Binaries)> = if layouts.is_empty() {
        vec![(None, binaries.clone())]
    } else {
        layouts
            .iter()
            .map(|(name, dir)| (Some(name.clone()), Binaries::in_dir(dir)))
            .collect()
    };
    let mut out = Vec::new();
    for (layout, bins) in builds {
        let baseline = out.len();
        for mode in modes {
            out.push(Entry {
                mode: Mode {
                    layout: layout.clone(),
                    ..mode.clone()
                },
                exe: bins.path(mode.binary).to_path_buf(),
                baseline,
            });
        }
    }
    out
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The modes with their binaries.
    pub entries: Vec<Entry>,
    /// The timed churn.
    pub churn: Churn,
    /// The children's arguments for a realistic workload (`log-index …`, `kv-store …`), timed
    /// instead of the churn; `None` times the churn.
    pub workload: Option<Vec<String>>,
    /// Allocations per thread of the tiny churn that measures each mode's one-time set-up, run
    /// once per mode and round; `None` skips it (a warm-up already leaves the set-up out).
    pub setup_allocations: Option<u64>,
    /// Rounds; every mode runs once per round.
    pub rounds: usize,
    /// Seeds the run order of the rounds.
    pub seed: u64,
    /// Prints progress to stderr on long runs.
    pub progress: bool,
}

/// Per entry and round: a figure, or `None` where that run failed.
pub type PerRound = Vec<Vec<Option<f64>>>;

/// What the rounds measured.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// Wall seconds of the timed churn.
    pub wall: PerRound,
    /// CPU seconds of the timed churn (see [`crate::workload::Timing::cpu`]).
    pub cpu: PerRound,
    /// CPU seconds of the tiny set-up churn.
    pub setup_cpu: PerRound,
    /// Per entry, what its last successful timed run printed.
    pub last_output: Vec<Option<ChildOutput>>,
    /// Every failed or silent run: which, in which round, and why.
    pub failures: Vec<String>,
}

/// Runs every entry of `plan` once per round, in a new random order each round (so no mode
/// always runs right after another: a machine that slows down or speeds up within a round would
/// otherwise favour a fixed position). A run that fails, or prints no CPU time, is recorded in
/// [`Measurements::failures`] and leaves a hole in its row.
pub fn run(plan: &Plan) -> Measurements {
    let n = plan.entries.len();
    let mut m = Measurements {
        wall: vec![vec![None; plan.rounds]; n],
        cpu: vec![vec![None; plan.rounds]; n],
        setup_cpu: vec![vec![None; plan.rounds]; n],
        last_output: vec![None; n],
        failures: Vec::new(),
    };
    let timed_args = plan
        .workload
        .clone()
        .unwrap_or_else(|| churn_args(&plan.churn));
    let setup_args = plan.setup_allocations.map(|allocations| {
        churn_args(&Churn {
            allocations,
            warmup: 0,
            ..plan.churn
        })
    });
    let mut rng = Xorshift::new(plan.seed);
    let mut order: Vec<usize> = (0..n).collect();
    for round in 0..plan.rounds {
        rng.shuffle(&mut order);
        if plan.progress && plan.rounds >= 50 && round % (plan.rounds / 10) == 0 {
            eprintln!("round {round}/{}", plan.rounds);
        }
        for &i in &order {
            let entry = &plan.entries[i];
            let label = entry.mode.label();
            match run_child(&entry.exe, &timed_args, &entry.mode.env) {
                Ok(out) => match (out.seconds("cpu_ns"), out.seconds("elapsed_ns")) {
                    (Some(cpu), Some(wall)) => {
                        m.cpu[i][round] = Some(cpu);
                        m.wall[i][round] = Some(wall);
                        m.last_output[i] = Some(out);
                    }
                    _ => m.failures.push(format!(
                        "{label}, round {round}: printed no cpu_ns/elapsed_ns"
                    )),
                },
                Err(e) => m.failures.push(format!("{label}, round {round}: {e}")),
            }
            if let Some(args) = &setup_args {
                match run_child(&entry.exe, args, &entry.mode.env) {
                    Ok(out) => match out.seconds("cpu_ns") {
                        Some(cpu) => m.setup_cpu[i][round] = Some(cpu),
                        None => m.failures.push(format!(
                            "{label}, round {round}, set-up churn: printed no cpu_ns"
                        )),
                    },
                    Err(e) => m
                        .failures
                        .push(format!("{label}, round {round}, set-up churn: {e}")),
                }
            }
        }
    }
    m
}

/// The settings of the sample-cost child: every allocation sampled, 32 frames kept.
pub fn sample_cost_env(unwinder: &str) -> Vec<(String, String)> {
    vec![(
        "JEPROF_SHIM".to_string(),
        format!("sample_rate:1,max_frames:32,symbolize:false,unwinder:{unwinder}"),
    )]
}

/// Runs the shim's sample-cost child: `allocations` allocations of 64 bytes 40 frames deep, all
/// sampled, with `unwinder`.
pub fn sample_cost(shim: &Path, unwinder: &str, allocations: u64) -> Result<ChildOutput, String> {
    let args = vec![
        "sample-cost".to_string(),
        "--allocations".to_string(),
        allocations.to_string(),
    ];
    run_child(shim, &args, &sample_cost_env(unwinder))
}

/// Runs the shim's dump child: `live` sampled blocks over 64 stacks, dumped raw and symbolized.
pub fn dump(shim: &Path, live: u64) -> Result<ChildOutput, String> {
    let args = vec!["dump".to_string(), "--live".to_string(), live.to_string()];
    let env = vec![("JEPROF_SHIM".to_string(), "sample_rate:1".to_string())];
    run_child(shim, &args, &env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::select;

    #[test]
    fn child_output_reads_key_value_lines_and_skips_others() {
        let out = ChildOutput::parse("elapsed_ns 1500\nnoise\ncpu_ns 2000000000\nunwinder Fp\n");
        assert_eq!(out.seconds("cpu_ns"), Some(2.0));
        assert_eq!(out.get("unwinder"), Some("Fp"));
        assert_eq!(out.get("noise"), None);
    }

    #[test]
    fn each_layout_has_its_own_baseline() {
        let modes = select(Some(&["off".to_string()]), &[]).unwrap();
        let bins = Binaries::in_dir(Path::new("/built"));
        let layouts = vec![
            ("a".to_string(), PathBuf::from("/l/a")),
            ("b".to_string(), PathBuf::from("/l/b")),
        ];
        let e = entries(&modes, &bins, &layouts);
        let rows: Vec<(String, PathBuf, usize)> = e
            .iter()
            .map(|e| (e.mode.label(), e.exe.clone(), e.baseline))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("jemalloc [a]".into(), "/l/a/churn-plain".into(), 0),
                ("shim, sampling off [a]".into(), "/l/a/churn-shim".into(), 0),
                ("jemalloc [b]".into(), "/l/b/churn-plain".into(), 2),
                ("shim, sampling off [b]".into(), "/l/b/churn-shim".into(), 2),
            ]
        );
    }

    #[test]
    fn without_layouts_the_built_binaries_run() {
        let modes = select(Some(&["again".to_string()]), &[]).unwrap();
        let bins = Binaries::in_dir(Path::new("/built"));
        let e = entries(&modes, &bins, &[]);
        assert!(e.iter().all(|e| e.baseline == 0 && e.mode.layout.is_none()));
        assert_eq!(e[1].exe, PathBuf::from("/built/churn-plain"));
    }

    #[test]
    fn a_failing_child_is_an_error_with_its_status() {
        let err =
            run_child(Path::new("/bin/sh"), &["-c".into(), "exit 3".into()], &[]).unwrap_err();
        assert!(err.contains('3'), "{err}");
    }

    #[test]
    fn a_child_never_inherits_the_profilers_settings() {
        // The only test of this crate that sets a variable of its own process.
        std::env::set_var("JEPROF_SHIM", "sample_rate:1");
        let out = run_child(
            Path::new("/bin/sh"),
            &["-c".into(), "echo shim ${JEPROF_SHIM:-unset}".into()],
            &[],
        )
        .unwrap();
        std::env::remove_var("JEPROF_SHIM");
        assert_eq!(out.get("shim"), Some("unset"));
    }
}
