//! How dump files are read: the read policy (strict, or accepting dumps cut while being written),
//! whole or one stack at a time, a dump's memory map parsed once, when first needed, and what
//! orders a series of dumps and names each dump's process ([`series_key`]).
//!
//! Everything that reads a dump file reads it here; [`crate::named_input`] adds names
//! to what is read.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use jeprof_dumpfmt::labels::scan_labels;
use jeprof_dumpfmt::maps::{self, Mapping};
use jeprof_dumpfmt::read::{ReadOptions, Truncation};
use jeprof_dumpfmt::series::{DumpName, Process, ProcessCounts, SeriesKey};
use jeprof_dumpfmt::Profile;
use rayon::prelude::*;

use crate::error::Error;

/// How dump files are read: whether a dump that was cut while being written is accepted, and who
/// hears what was lost from one.
#[derive(Clone, Copy)]
pub struct ReadPolicy<'a> {
    /// The reader's options ([`ReadOptions::allow_truncated`]).
    pub options: ReadOptions,
    /// Told about every dump read although it was cut (only with `allow_truncated`).
    pub on_truncated: &'a (dyn Fn(&Path, &Truncation) + Sync),
}

impl Default for ReadPolicy<'static> {
    /// Strict: a cut dump is an error.
    fn default() -> ReadPolicy<'static> {
        ReadPolicy {
            options: ReadOptions::default(),
            on_truncated: &|_, _| {},
        }
    }
}

/// Reads one dump file under `policy` ([`jeprof_dumpfmt::read::read_file_with`]: regular files
/// only, streamed, errors naming the file and line).
pub fn read_dump(path: &Path, policy: &ReadPolicy<'_>) -> Result<Profile, jeprof_dumpfmt::Error> {
    let mut stacks = Vec::new();
    let mut profile = read_dump_stacks(path, policy, |_, stack| stacks.push(stack))?;
    profile.stacks = stacks;
    Ok(profile)
}

/// Reads one dump file under `policy` as [`read_dump`] does, handing each stack to `on_stack`
/// instead of keeping it ([`jeprof_dumpfmt::read::read_file_stacks_with`]): memory holds what
/// `on_stack` keeps, never the dump's stacks. The profile returned has no stacks.
pub fn read_dump_stacks(
    path: &Path,
    policy: &ReadPolicy<'_>,
    on_stack: impl FnMut(&Profile, jeprof_dumpfmt::Stack),
) -> Result<Profile, jeprof_dumpfmt::Error> {
    let read = jeprof_dumpfmt::read::read_file_stacks_with(path, &policy.options, on_stack)?;
    if let Some(truncation) = &read.truncation {
        (policy.on_truncated)(path, truncation);
    }
    Ok(read.profile)
}

/// Parses dumps in parallel, each with where it came from (for messages); the first failure in
/// `paths` order is the error.
pub fn parse_all(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<Vec<(Profile, String)>, Error> {
    paths
        .par_iter()
        .map(|p| Ok((read_dump(p, policy)?, p.display().to_string())))
        .collect()
}

/// A dump's memory map ([`Profile::mapped_libraries`]), parsed when first asked for: a dump whose
/// symbol section names every frame never needs it, and a merge of thousands of such dumps should
/// not parse their maps.
pub(crate) struct MemoryMap<'p> {
    text: Option<&'p str>,
    parsed: OnceCell<Vec<Mapping>>,
}

impl<'p> MemoryMap<'p> {
    /// The memory map of `profile`, not parsed yet.
    pub(crate) fn of(profile: &'p Profile) -> MemoryMap<'p> {
        MemoryMap {
            text: profile.mapped_libraries.as_deref(),
            parsed: OnceCell::new(),
        }
    }

    /// The mappings (none when the dump has no map).
    pub(crate) fn mappings(&self) -> &[Mapping] {
        self.parsed
            .get_or_init(|| self.text.map(maps::parse_maps).unwrap_or_default())
    }

    /// The mappings, owned.
    pub(crate) fn into_mappings(self) -> Vec<Mapping> {
        self.mappings();
        self.parsed.into_inner().unwrap_or_default()
    }

    /// The mapped file holding `address` and the file offset of `address` in it, when a mapping
    /// of a file covers it: where an address of one build is in every process, whatever ASLR did.
    pub(crate) fn module(&self, address: u64) -> Option<(&str, u64)> {
        maps::find(self.mappings(), address)
            .filter(|m| m.is_file())
            .map(|m| (m.path.as_str(), m.file_offset(address)))
    }
}

/// What orders `path` in a series and names its process ([`jeprof_dumpfmt::series`]): its
/// labels (read from the front of the file only, [`jeprof_dumpfmt::labels::scan_labels`]), its
/// file name and its modification time.
/// A path that is not a regular file (a device, a pipe, which opening could block on) gets a key
/// without labels: reading it as a dump is refused, naming what it is.
pub fn series_key(path: &Path) -> Result<SeriesKey, Error> {
    let unreadable = |e: std::io::Error| Error::from(jeprof_dumpfmt::Error::from(e).in_file(path));
    let metadata = std::fs::metadata(path).map_err(unreadable)?;
    let modified = metadata.modified().ok();
    if !metadata.is_file() {
        return Ok(key_of(path, &[], modified));
    }
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let labels = scan_labels(std::io::BufReader::new(file)).map_err(unreadable)?;
    Ok(key_of(path, &labels, modified))
}

/// [`series_key`] of every path, in parallel, in `paths` order; the first failure in that order
/// is the error.
pub fn series_keys(paths: &[PathBuf]) -> Result<Vec<SeriesKey>, Error> {
    paths.par_iter().map(|p| series_key(p)).collect()
}

/// [`series_keys`], each dump read whole (one stack at a time, under `policy`) for its labels:
/// every file is checked before any work, for a series of which only some dumps are resolved.
pub fn series_keys_checked(
    paths: &[PathBuf],
    policy: &ReadPolicy<'_>,
) -> Result<Vec<SeriesKey>, Error> {
    paths
        .par_iter()
        .map(|p| {
            let labels = read_dump_stacks(p, policy, |_, _| {})?.labels;
            let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok();
            Ok(key_of(p, &labels, modified))
        })
        .collect()
}

/// The key of the dump at `path` with `labels`, modified at `modified`.
fn key_of(path: &Path, labels: &[(String, String)], modified: Option<SystemTime>) -> SeriesKey {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(DumpName::parse);
    SeriesKey {
        path: path.display().to_string(),
        time: jeprof_dumpfmt::labels::get(labels, "time")
            .and_then(jeprof_dumpfmt::labels::parse_rfc3339),
        process: Process::of(labels, name.as_ref()),
        name,
        modified,
    }
}

/// The warning `report` and `merge` print when their dumps hold several of one
/// process (they add them up, as jeprof does: the sum of a process's periodic dumps is no heap
/// it ever had), or `None`.
pub fn repeated_process_warning(counts: &ProcessCounts) -> Option<String> {
    let (processes, dumps) = counts.repeated()?;
    Some(format!(
        "{dumps} of the {} dumps come from {processes} process{} with several dumps each (same \
         pid and host, by labels or jemalloc's file names), and they are added up as jeprof adds \
         them; for a fleet merge of periodic dumps give --latest-per-process (each process's last \
         dump)",
        counts.dumps(),
        if processes == 1 { "" } else { "es" },
    ))
}

/// The warning `export` prints when its dumps hold several of one process, or `None`: nothing is
/// added up there (each dump has rows of its own), but the rows of a process's periodic dumps are
/// a series, and a query that adds in-use figures across them counts its heap once per dump.
pub fn repeated_process_rows_warning(counts: &ProcessCounts) -> Option<String> {
    let (processes, dumps) = counts.repeated()?;
    Some(format!(
        "{dumps} of the {} dumps come from {processes} process{} with several dumps each (same \
         pid and host, by labels or jemalloc's file names): their rows are a series, so group by \
         time (or pick one dump per process) before adding in-use figures, or give \
         --latest-per-process to export each process's last dump only",
        counts.dumps(),
        if processes == 1 { "" } else { "es" },
    ))
}

/// The paths of each process's last dump in series order, and of every dump of no known
/// process, in the order given ([`jeprof_dumpfmt::series::latest_per_process`]).
pub fn latest_per_process(paths: &[PathBuf], keys: &[SeriesKey]) -> Vec<PathBuf> {
    jeprof_dumpfmt::series::latest_per_process(keys)
        .into_iter()
        .map(|i| paths[i].clone())
        .collect()
}
