//! The churn's modes: one table of which binary runs the churn and with which settings.
//!
//! A mode's settings are environment variables because both profilers read theirs at start-up:
//! the shim `JEPROF_SHIM`, jemalloc `_RJEM_MALLOC_CONF` (the prefix tikv-jemallocator builds it
//! with). That is also why every mode is a process of its own.

use std::path::{Path, PathBuf};

/// Which child binary runs a mode: the global allocator is fixed when the binary is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `churn-plain`: `tikv_jemallocator::Jemalloc`, nothing in front.
    Plain,
    /// `churn-shim`: `jeprof_shim::Profiled<Jemalloc>`.
    Shim,
}

impl Binary {
    /// The binary's file name (as cargo builds it and as a layout directory holds it).
    pub fn file_name(self) -> &'static str {
        match self {
            Binary::Plain => "churn-plain",
            Binary::Shim => "churn-shim",
        }
    }
}

/// Where the two child binaries are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `churn-plain`.
    pub plain: PathBuf,
    /// `churn-shim`.
    pub shim: PathBuf,
}

impl Binaries {
    /// The two binaries in `dir` (a code layout's directory).
    pub fn in_dir(dir: &Path) -> Self {
        Binaries {
            plain: dir.join(Binary::Plain.file_name()),
            shim: dir.join(Binary::Shim.file_name()),
        }
    }

    /// The path of `binary`.
    pub fn path(&self, binary: Binary) -> &Path {
        match binary {
            Binary::Plain => &self.plain,
            Binary::Shim => &self.shim,
        }
    }
}

/// One row of [`MODES`].
#[derive(Debug, Clone, Copy)]
pub struct ModeSpec {
    /// What `--modes` calls it.
    pub key: &'static str,
    /// The binary that runs it.
    pub binary: Binary,
    /// Environment variables set for the child (all others are inherited, except that
    /// `JEPROF_SHIM` and `_RJEM_MALLOC_CONF` are always cleared first).
    pub env: &'static [(&'static str, &'static str)],
    /// The row's label in the tables.
    pub description: &'static str,
}

/// The key of the baseline: every ratio is taken against it, so it always runs.
pub const BASELINE: &str = "jemalloc";

/// Every fixed mode. R = 512 KiB is both profilers' default period (jemalloc's
/// `lg_prof_sample:19`), so the sampling modes take about the same number of samples.
pub const MODES: &[ModeSpec] = &[
    ModeSpec {
        key: BASELINE,
        binary: Binary::Plain,
        env: &[],
        description: "jemalloc",
    },
    // The same binary and settings again: how far apart two identical runs land on this machine,
    // so every other row's ratio can be read against it.
    ModeSpec {
        key: "again",
        binary: Binary::Plain,
        env: &[],
        description: "jemalloc again (noise floor)",
    },
    ModeSpec {
        key: "off",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:0")],
        description: "shim, sampling off",
    },
    ModeSpec {
        key: "fp",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:524288,unwinder:fp")],
        description: "shim, R=512KiB, fp",
    },
    ModeSpec {
        key: "backtrace",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:524288,unwinder:backtrace")],
        description: "shim, R=512KiB, backtrace",
    },
    ModeSpec {
        key: "eh_frame",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:524288,unwinder:eh_frame")],
        description: "shim, R=512KiB, eh_frame",
    },
    ModeSpec {
        key: "auto",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:524288")],
        description: "shim, R=512KiB, auto",
    },
    ModeSpec {
        key: "jemalloc-prof",
        binary: Binary::Plain,
        env: &[("_RJEM_MALLOC_CONF", "prof:true,lg_prof_sample:19")],
        description: "jemalloc prof, lg_prof_sample:19",
    },
    ModeSpec {
        key: "eh_frame-64k",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:65536,unwinder:eh_frame")],
        description: "shim, R=64KiB, eh_frame",
    },
    ModeSpec {
        key: "fp-64k",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:65536,unwinder:fp")],
        description: "shim, R=64KiB, fp",
    },
    ModeSpec {
        key: "backtrace-64k",
        binary: Binary::Shim,
        env: &[("JEPROF_SHIM", "sample_rate:65536,unwinder:backtrace")],
        description: "shim, R=64KiB, backtrace",
    },
    ModeSpec {
        key: "jemalloc-inactive",
        binary: Binary::Plain,
        env: &[("_RJEM_MALLOC_CONF", "prof:true,prof_active:false")],
        description: "jemalloc prof, prof_active:false",
    },
    ModeSpec {
        key: "jemalloc-prof-64k",
        binary: Binary::Plain,
        env: &[("_RJEM_MALLOC_CONF", "prof:true,lg_prof_sample:16")],
        description: "jemalloc prof, lg_prof_sample:16",
    },
];

/// The row of `key`, if there is one.
pub fn spec(key: &str) -> Option<&'static ModeSpec> {
    MODES.iter().find(|m| m.key == key)
}

/// A mode as the runner runs it: a row of [`MODES`] or a sampling period of `--rates`, with one
/// code layout's binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    /// Its key (`fp@131072` for a period of `--rates`).
    pub key: String,
    /// Its label in the tables.
    pub description: String,
    /// Which binary runs it.
    pub binary: Binary,
    /// Its environment (see [`ModeSpec::env`]).
    pub env: Vec<(String, String)>,
    /// The code layout it runs with, none for the binaries cargo built.
    pub layout: Option<String>,
}

impl Mode {
    /// The mode of a table row.
    pub fn from_spec(spec: &ModeSpec) -> Self {
        Mode {
            key: spec.key.to_string(),
            description: spec.description.to_string(),
            binary: spec.binary,
            env: spec
                .env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            layout: None,
        }
    }

    /// The frame-pointer mode at period `rate` bytes: with several periods, the cost per sample
    /// and what remains with almost no samples can be read off the rows.
    pub fn fp_at_rate(rate: u64) -> Self {
        Mode {
            key: format!("fp@{rate}"),
            description: format!("shim, R={rate} B, fp"),
            binary: Binary::Shim,
            env: vec![(
                "JEPROF_SHIM".to_string(),
                format!("sample_rate:{rate},unwinder:fp"),
            )],
            layout: None,
        }
    }

    /// Its label, with its layout where it has one.
    pub fn label(&self) -> String {
        match &self.layout {
            Some(layout) => format!("{} [{layout}]", self.description),
            None => self.description.clone(),
        }
    }

    /// Whether it is the baseline of its layout.
    pub fn is_baseline(&self) -> bool {
        self.key == BASELINE
    }
}

/// The modes of a run: the baseline, then the rows of `keys` in table order (every row when
/// `keys` is `None`), then the frame-pointer mode at each of `rates`. Unknown keys are an error
/// naming them.
pub fn select(keys: Option<&[String]>, rates: &[u64]) -> Result<Vec<Mode>, String> {
    if let Some(keys) = keys {
        if let Some(unknown) = keys.iter().find(|k| spec(k).is_none()) {
            return Err(format!(
                "unknown mode {unknown:?} (known: {})",
                known_keys()
            ));
        }
    }
    let mut modes: Vec<Mode> = MODES
        .iter()
        .filter(|m| m.key == BASELINE || keys.is_none_or(|keys| keys.iter().any(|k| k == m.key)))
        .map(Mode::from_spec)
        .collect();
    modes.extend(rates.iter().map(|&rate| Mode::fp_at_rate(rate)));
    Ok(modes)
}

/// The keys of [`MODES`], comma-separated.
pub fn known_keys() -> String {
    MODES.iter().map(|m| m.key).collect::<Vec<_>>().join(", ")
}

/// The table as `--list-modes` prints it.
pub fn describe() -> String {
    let mut out = String::new();
    for m in MODES {
        let env: Vec<String> = m.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "{:<14} {:<12} {:<52} {}\n",
            m.key,
            m.binary.file_name(),
            if env.is_empty() {
                "-".to_string()
            } else {
                env.join(" ")
            },
            m.description
        ));
    }
    out.push_str(&format!(
        "{:<14} {:<12} {:<52} {}\n",
        "(--rates R)",
        Binary::Shim.file_name(),
        "JEPROF_SHIM=sample_rate:R,unwinder:fp",
        "shim, R=R B, fp"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_keys_are_unique() {
        for (i, m) in MODES.iter().enumerate() {
            assert!(
                MODES[i + 1..].iter().all(|n| n.key != m.key),
                "{} twice",
                m.key
            );
        }
    }

    #[test]
    fn selection_always_starts_with_the_baseline() {
        let modes = select(Some(&["fp".to_string()]), &[131072]).unwrap();
        let keys: Vec<&str> = modes.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["jemalloc", "fp", "fp@131072"]);
    }

    #[test]
    fn selection_without_keys_is_the_whole_table() {
        assert_eq!(select(None, &[]).unwrap().len(), MODES.len());
    }

    #[test]
    fn unknown_mode_is_an_error_that_names_it() {
        let err = select(Some(&["fp".to_string(), "stop-arena".to_string()]), &[]).unwrap_err();
        assert!(err.contains("\"stop-arena\""), "{err}");
    }

    #[test]
    fn jemalloc_profiler_mode_samples_at_the_shims_period() {
        let setting = |key: &str, var: &str, name: &str| -> u64 {
            let (_, value) = spec(key)
                .unwrap()
                .env
                .iter()
                .find(|(k, _)| *k == var)
                .unwrap();
            let pair = value
                .split(',')
                .find_map(|kv| kv.strip_prefix(name))
                .unwrap();
            pair.trim_start_matches(':').parse().unwrap()
        };
        let lg = setting("jemalloc-prof", "_RJEM_MALLOC_CONF", "lg_prof_sample");
        for shim in ["fp", "backtrace", "eh_frame"] {
            assert_eq!(
                setting(shim, "JEPROF_SHIM", "sample_rate"),
                1 << lg,
                "{shim}"
            );
        }
        assert_eq!(spec("jemalloc-prof").unwrap().binary, Binary::Plain);
    }
}
