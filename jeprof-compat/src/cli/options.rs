//! What was parsed ([`crate::cli::defs`]) turned into the options the library takes (ripgrep's
//! `hiargs.rs`): symbolization, the read policy, skip rules, attribution, report options, rounding,
//! labels and thread counts. Invalid values (a regex that does not compile, a bad label) fail here,
//! before any dump is read.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use jeprof_compat::attribution::Attribution;
use jeprof_compat::input::{self, ReadPolicy};
use jeprof_compat::merge::{self, OutputRounding};
use jeprof_compat::names::{NameStyle, SkipRules};
use jeprof_compat::report::{Measure, ReportOptions};
use jeprof_compat::symbolize::{
    check_debug_dirs, MissingDebugFile, NameRule, OnMissing, SymbolizeOptions,
};
use jeprof_compat::views::filters::StackFilters;
use jeprof_compat::views::remote;
use jeprof_compat::{binary, export, pprof};
use jeprof_dumpfmt::read::ReadOptions;
use jeprof_dumpfmt::series::ProcessCounts;
use regex::Regex;

use crate::cli::defs::{
    AttributionArgs, Common, ExportArgs, JeprofViewArgs, MeasureArgs, MergeArgs, PprofArgs,
    RoundingArg, ViewArgs,
};
use crate::cli::output::warn;

/// `pattern`, given as `option`, compiled; the error names both.
pub(crate) fn regex(option: &str, pattern: &str) -> anyhow::Result<Regex> {
    Regex::new(pattern).with_context(|| format!("{option} {pattern:?} is not a valid regex"))
}

/// [`regex()`] of an option that may be absent.
fn optional_regex(option: &str, pattern: Option<&str>) -> anyhow::Result<Option<Regex>> {
    pattern.map(|p| regex(option, p)).transpose()
}

impl Common {
    /// jeprof's form `PROGRAM DUMP...`: a program given first becomes `--binary`
    /// ([`binary::split_program`]), for the subcommands that read raw dumps.
    pub(crate) fn take_program(&mut self, dumps: &mut Vec<PathBuf>) -> anyhow::Result<()> {
        (*dumps, self.binary) = binary::split_program(std::mem::take(dumps), self.binary.take())?;
        Ok(())
    }

    /// [`Common::symbolize`] for the project's own views that show stacks as they are (the page,
    /// pprof, OTLP): a frame past the end of every sized symbol is `object+0xOFFSET`
    /// ([`NameRule::Sized`]), never a neighbour's name.
    pub(crate) fn symbolize_own(&self) -> anyhow::Result<SymbolizeOptions> {
        Ok(SymbolizeOptions {
            rule: NameRule::Sized,
            ..self.symbolize()?
        })
    }

    /// How frames are named: `--binary`, `--debug-dir` (each checked to be a directory), the
    /// name style, and jeprof's rule for frames no sized symbol covers ([`NameRule::Jeprof`]);
    /// a mapping whose debug file is missing is named in a warning, once per mapping and
    /// build id whatever the number of dumps.
    pub(crate) fn symbolize(&self) -> anyhow::Result<SymbolizeOptions> {
        check_debug_dirs(&self.debug_dirs)?;
        let warned: Mutex<HashSet<MissingDebugFile>> = Mutex::new(HashSet::new());
        let dirs: Vec<String> = self
            .debug_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let dirs = dirs.join(", ");
        let on_missing = move |missing: &MissingDebugFile| {
            let first = warned
                .lock()
                .map_or(true, |mut w| w.insert(missing.clone()));
            if first {
                warn(&format!(
                    "{missing} in --debug-dir {dirs}; its frames keep what the mapped file \
                     names, else stay addresses"
                ));
            }
        };
        Ok(SymbolizeOptions {
            binary: self.binary.clone(),
            style: if self.jeprof_names {
                NameStyle::Jeprof
            } else {
                NameStyle::Clean
            },
            debug_dirs: self.debug_dirs.clone(),
            on_missing: Some(OnMissing(Arc::new(on_missing))),
            rule: NameRule::Jeprof,
        })
    }

    /// How dumps are read: a truncated dump is an error, or (`--allow-truncated`) read up to its
    /// last whole line with a warning saying what was lost.
    pub(crate) fn read_policy(&self) -> ReadPolicy<'static> {
        ReadPolicy {
            options: ReadOptions {
                allow_truncated: self.allow_truncated,
            },
            on_truncated: &|path, truncation| {
                warn(&format!("{}: {truncation}", path.display()));
            },
        }
    }

    pub(crate) fn skip(&self) -> SkipRules {
        // `--keep_alloc_frames`: jeprof's rule, its skip list by name only.
        SkipRules {
            rust_allocator_frames: !self.keep_alloc_frames,
            allocator_objects: !self.keep_alloc_frames,
        }
    }
}

impl MeasureArgs {
    /// The measure chosen, in-use bytes when none is.
    pub(crate) fn measure(&self) -> Measure {
        if self.inuse_objects {
            Measure::InuseObjects
        } else if self.alloc_space {
            Measure::AllocSpace
        } else if self.alloc_objects {
            Measure::AllocObjects
        } else {
            Measure::InuseSpace
        }
    }
}

impl AttributionArgs {
    /// `--hide` and `--show_from`; without `--hide`, the standard library and the allocator are
    /// hidden, unless `--jeprof_names` asks for jeprof's own attribution.
    pub(crate) fn attribution(&self, common: &Common) -> anyhow::Result<Attribution> {
        let hide = match self.hide.as_deref() {
            None if common.jeprof_names => None,
            None => Attribution::user_code().hide,
            Some("") => None,
            Some(re) => Some(regex("--hide", re)?),
        };
        let show_from = match self.show_from.as_deref() {
            None | Some("") => None,
            Some(re) => Some(regex("--show_from", re)?),
        };
        Ok(Attribution { hide, show_from })
    }
}

impl RoundingArg {
    pub(crate) fn output_rounding(self) -> OutputRounding {
        match self {
            RoundingArg::Optimal => OutputRounding::Optimal,
            RoundingArg::Best => OutputRounding::Best,
            RoundingArg::Nearest => OutputRounding::Nearest,
        }
    }
}

/// The options of a text report or diff; `report` then sets its sort order, filters and lines.
pub(crate) fn report_options(
    view: &ViewArgs,
    common: &Common,
    attribution: &AttributionArgs,
    interval: bool,
) -> anyhow::Result<ReportOptions> {
    Ok(ReportOptions {
        measure: view.measure.measure(),
        show_bytes: view.show_bytes,
        focus: optional_regex("--focus", view.focus.as_deref())?,
        skip: common.skip(),
        nodecount: view.nodecount,
        interval,
        attribution: attribution.attribution(common)?,
        sort_by_cum: false,
        filters: Default::default(),
        lines: false,
    })
}

/// `--label KEY=VALUE`s, checked.
pub(crate) fn parse_labels(labels: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(labels
        .iter()
        .map(|l| export::parse_label(l))
        .collect::<Result<Vec<_>, _>>()?)
}

impl PprofArgs {
    pub(crate) fn pprof_options(&self) -> anyhow::Result<pprof::PprofOptions> {
        Ok(pprof::PprofOptions {
            skip: self.common.skip(),
            attribution: self.attribution.attribution(&self.common)?,
            binary: self.common.binary.clone(),
            labels: parse_labels(&self.labels)?,
        })
    }
}

impl MergeArgs {
    /// Dumps parsed at once: `--jobs`, else the number of cores.
    pub(crate) fn jobs(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The dumps to merge, in order: the DUMP arguments, then each `--inputs-dir`, then each
    /// `--inputs-from` list.
    pub(crate) fn inputs(&self) -> Vec<merge::Input> {
        self.dumps
            .iter()
            .cloned()
            .map(merge::Input::Path)
            .chain(self.inputs_dir.iter().cloned().map(merge::Input::Dir))
            .chain(self.inputs_from.iter().cloned().map(merge::Input::List))
            .collect()
    }

    /// `--format pprof`'s options, given the `--label`s (checked before the merge).
    pub(crate) fn pprof_options(
        &self,
        labels: Vec<(String, String)>,
    ) -> anyhow::Result<pprof::PprofOptions> {
        Ok(pprof::PprofOptions {
            skip: self.common.skip(),
            attribution: self.attribution.attribution(&self.common)?,
            binary: self.common.binary.clone(),
            labels,
        })
    }
}

impl ExportArgs {
    /// Dumps read at once: `--jobs`, else the number of cores, at most 4.
    fn jobs(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
    }

    pub(crate) fn export_options(&self) -> anyhow::Result<export::ExportOptions> {
        Ok(export::ExportOptions {
            // The project's rule, as `leaks`: rows name no frame by a guessed neighbour, and skip
            // allocator frames by their object as well as by name.
            symbolize: self.common.symbolize_own()?,
            rows: export::RowOptions {
                skip: self.common.skip(),
                per_thread: self.per_thread,
            },
            labels: parse_labels(&self.labels)?,
            jobs: self.jobs(),
        })
    }
}

impl JeprofViewArgs {
    /// `--ignore`, `--retain`, `--exclude`.
    pub(crate) fn filters(&self) -> anyhow::Result<StackFilters> {
        Ok(StackFilters {
            ignore: optional_regex("--ignore", self.ignore.as_deref())?,
            retain: optional_regex("--retain", self.retain.as_deref())?,
            exclude: optional_regex("--exclude", self.exclude.as_deref())?,
        })
    }

    /// Whether the report needs the dumps whole (subtracted, or split by thread) rather than
    /// read one stack at a time.
    pub(crate) fn needs_whole_dumps(&self, dumps: &[PathBuf]) -> bool {
        self.base.is_some() || self.needs_whole_dumps_besides_base(dumps)
    }

    /// [`Self::needs_whole_dumps`] but for `--base`, which `--html` takes as its own (the
    /// earlier moment of "what grew"), though not as a URL.
    pub(crate) fn needs_whole_dumps_besides_base(&self, dumps: &[PathBuf]) -> bool {
        let url = |p: &PathBuf| p.to_str().is_some_and(remote::is_url);
        dumps.iter().any(url)
            || self.base.as_ref().is_some_and(url)
            || self.thread.is_some()
            || self.callgrind
            || self.list.is_some()
            || self.dot
            || self.svg
    }

    /// Warns of options that do nothing as given.
    pub(crate) fn check(&self) {
        if self.drop_negative && self.base.is_none() {
            warn("--drop_negative does nothing without --base");
        }
    }

    /// How long to wait for each page of a process's profile.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

/// The dumps `report` and `export` read: with `--latest-per-process` each process's last
/// ([`input::latest_per_process`]); without it all, with `warning`'s warning when several are of
/// one process (`report`'s [`input::repeated_process_warning`], `export`'s
/// [`input::repeated_process_rows_warning`]). URLs are left as they are.
pub(crate) fn per_process(
    dumps: &mut Vec<PathBuf>,
    latest: bool,
    warning: fn(&ProcessCounts) -> Option<String>,
) -> anyhow::Result<()> {
    if dumps.iter().any(|p| p.to_str().is_some_and(remote::is_url)) {
        if latest {
            anyhow::bail!("--latest-per-process reads dump files, not a process's URL");
        }
        return Ok(());
    }
    if dumps.len() < 2 {
        return Ok(());
    }
    let keys = input::series_keys(dumps)?;
    if latest {
        *dumps = input::latest_per_process(dumps, &keys);
    } else if let Some(warning) = warning(&ProcessCounts::of(&keys)) {
        warn(&warning);
    }
    Ok(())
}
