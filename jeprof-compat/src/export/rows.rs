//! A dump as rows, whatever stores them: its identity (path, pid, time, build id, binary, labels,
//! period) and one row per stack, or per stack and thread, with the stack's frames three ways and
//! its unbiased figures. Schema v1 is in `docs/design.md` §13; [`super::parquet`] writes it.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use jeprof_dumpfmt::charge::{self, FrameClass, LAST_USER_ADDRESS};
use jeprof_dumpfmt::maps::Mapping;
use jeprof_dumpfmt::rss::{ByteEstimate, RssFigures};
use jeprof_dumpfmt::{labels, Counts, Profile};

use crate::attribution::Attribution;
use crate::hash::FastMap;
use crate::input::MemoryMap;
use crate::names::SkipRules;
use crate::report::{allocator_names_inlined, frame_class};
use crate::symbolize::{is_shared_library, unsymbolized_identity, Frame, ResolvedProfile};

/// What names a dump: the columns every row of the dump shares.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpIdentity {
    /// The dump's path as given.
    pub dump: String,
    /// Label `pid`, else the pid in a jemalloc-style file name.
    pub pid: Option<i64>,
    /// Label `time`, else the file's modification time: microseconds since 1970-01-01 UTC.
    pub time_micros: Option<i64>,
    /// Label `build_id`.
    pub build_id: Option<String>,
    /// Label `program`, else the program the symbol section names, else the one executable file
    /// the memory map maps that is not a shared library.
    pub binary: Option<String>,
    /// The dump's labels, then the extra ones (which replace a dump's label of the same key).
    pub labels: Vec<(String, String)>,
    /// The dump's sample period R.
    pub sample_period: i64,
}

/// One row: a stack of a dump (or one thread's share of it).
#[derive(Debug, Clone, PartialEq)]
pub struct StackRow {
    /// The thread's uid for a per-thread row; `None` for a row covering all threads.
    pub thread: Option<i64>,
    /// Function names, leaf first, allocator frames removed as the reports remove them, inlined
    /// functions suffixed ` (inline)`, unnamed frames as the reports print them.
    pub frames: Vec<Arc<str>>,
    /// Every frame, leaf first: `file+0xOFFSET` of the address jeprof looks up (callers minus
    /// one) through the memory map, else that address as `0x` and 16 hex digits.
    pub locations: Vec<Arc<str>>,
    /// Every frame's address as the dump has it, leaf first.
    pub addresses: Vec<u64>,
    /// `frames[0]`.
    pub leaf: Option<Arc<str>>,
    /// The function the reports charge flat to: the first of `frames` that
    /// [`crate::names::DEFAULT_HIDE`] does not match (the leaf when all match).
    pub user_frame: Option<Arc<str>>,
    /// The unbiased figures and their variances.
    pub counts: Counts,
    /// Where the stack's live objects are ([`attach_rss`]); `None` when the dump carries no
    /// residency figures, and for a per-thread row (the figures are the stack's, not a thread's).
    pub rss: Option<RowRss>,
}

/// A stack's residency figures ([`jeprof_dumpfmt::rss::SiteRss`]) as a row holds them: unbiased
/// estimates with their variances, each `None` where the dump does not know it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RowRss {
    /// Bytes of the stack's live objects on present pages; `None` when the page map was
    /// unreadable at the dump.
    pub resident: Option<ByteEstimate>,
    /// Bytes of them on swapped pages; `None` as `resident`.
    pub swapped: Option<ByteEstimate>,
    /// The stranded slab bytes charged to the stack; `None` when the allocator is not jemalloc.
    pub fragmentation: Option<ByteEstimate>,
}

/// A dump's identity and rows.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpRows {
    /// The columns the rows share.
    pub identity: DumpIdentity,
    /// The rows, in the dump's stack order.
    pub rows: Vec<StackRow>,
}

/// The identity of `profile` read from `path`: labels (the dump's, then `extra`, which replace
/// the dump's of the same key), and the fallbacks of `docs/design.md` §13 where a label is
/// missing. `mtime` is the file's modification time, if known.
pub fn identity(
    profile: &Profile,
    path: &Path,
    mtime: Option<SystemTime>,
    extra: &[(String, String)],
) -> DumpIdentity {
    let mut all = profile.labels.clone();
    for (k, v) in extra {
        labels::set(&mut all, k, v);
    }
    let label = |k: &str| labels::get(&all, k);
    let pid = label("pid")
        .and_then(|p| p.trim().parse::<i64>().ok())
        .or_else(|| pid_from_name(path));
    let time_micros = label("time")
        .and_then(labels::parse_rfc3339)
        .or_else(|| mtime.and_then(micros_since_epoch));
    let binary = label("program")
        .map(str::to_string)
        .or_else(|| {
            profile
                .symbols
                .as_ref()
                .and_then(|s| s.binary.clone())
                .filter(|b| !b.is_empty())
        })
        .or_else(|| main_executable(MemoryMap::of(profile).mappings()));
    DumpIdentity {
        dump: path.display().to_string(),
        pid,
        time_micros,
        build_id: label("build_id").map(str::to_string),
        binary,
        labels: all.clone(),
        sample_period: i64::try_from(profile.sample_period).unwrap_or(i64::MAX),
    }
}

fn micros_since_epoch(t: SystemTime) -> Option<i64> {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_micros()).ok()
}

/// The pid of a jemalloc-style dump name, `<prefix>.<pid>.<seq>.<kind><n>.heap` (kinds `i`, `m`,
/// `u` with a number, `f` without), the prefix possibly holding dots.
pub fn pid_from_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let mut parts = name.rsplit('.');
    if parts.next()? != "heap" {
        return None;
    }
    let kind = parts.next()?;
    let numbered = |k: &str| {
        k.len() > 1
            && matches!(&k[..1], "i" | "m" | "u")
            && k[1..].bytes().all(|b| b.is_ascii_digit())
    };
    if kind != "f" && !numbered(kind) {
        return None;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let seq = parts.next()?;
    let pid = parts.next()?;
    // A prefix must remain (jemalloc's is never empty).
    parts.next()?;
    if !digits(seq) || !digits(pid) {
        return None;
    }
    pid.parse().ok()
}

/// The file name of the one executable file of `mappings` that is not a shared library, when
/// there is exactly one (a process's program).
fn main_executable(mappings: &[Mapping]) -> Option<String> {
    let mut found: Option<&str> = None;
    for m in mappings {
        if m.executable && m.is_file() && !is_shared_library(&m.path) {
            match found {
                Some(p) if p != m.path => return None,
                _ => found = Some(m.path.as_str()),
            }
        }
    }
    found.map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
}

/// Which rows [`rows`] makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowOptions {
    /// Allocator frames removed from `frames` (as the reports' default).
    pub skip: SkipRules,
    /// One row per stack and thread where a stack has per-thread lines (and one row with
    /// `thread` null for a stack without them), instead of one row per stack.
    pub per_thread: bool,
}

/// The rows of `profile`, whose stacks' per-thread figures are `threads` (the dump's
/// [`jeprof_dumpfmt::Stack::threads`], in the same order as `profile.stacks`; only read with
/// [`RowOptions::per_thread`]).
///
/// A dump's stacks share their frames (one [`Frame`] per address), so each frame's names, its
/// location and whether it is an allocator frame are worked out once per dump, and the rows
/// share those strings: a row costs its three vectors, not a dozen formatted names.
pub fn rows(
    profile: &ResolvedProfile,
    threads: &[Vec<jeprof_dumpfmt::ThreadCounts>],
    options: &RowOptions,
) -> Vec<StackRow> {
    let hide = Attribution::user_code();
    // Each distinct frame's text, found by the frame's address (`resolve` makes one per key).
    let mut text_index: FastMap<*const Frame, usize> = FastMap::default();
    let mut texts: Vec<FrameText> = Vec::new();
    let mut of_stack: Vec<usize> = Vec::new();
    let mut out = Vec::with_capacity(profile.stacks.len());
    for (i, stack) in profile.stacks.iter().enumerate() {
        of_stack.clear();
        for f in &stack.frames {
            let k = *text_index.entry(Arc::as_ptr(f)).or_insert_with(|| {
                texts.push(FrameText::of(f, options.skip, &hide));
                texts.len() - 1
            });
            of_stack.push(k);
        }
        let texts_of_stack: Vec<&FrameText> = of_stack.iter().map(|&k| &texts[k]).collect();
        // The charging engine's rules 1 and 3 (`jeprof_dumpfmt::charge`): everything up to and
        // including the last allocator frame seen from the leaf goes; the user frame is the
        // first function `hide` passes, else the leaf's.
        let first_interesting =
            charge::allocator_frames(texts_of_stack.len(), |k| texts_of_stack[k].class);
        let shown = &texts_of_stack[first_interesting..];
        let named: Vec<&(Arc<str>, bool)> = shown.iter().flat_map(|t| &t.names).collect();
        let cut = hide.cut(named.len(), |k| named[k].1, |_| false);
        let frames: Vec<Arc<str>> = named.iter().map(|n| n.0.clone()).collect();
        let user_frame = frames.get(cut.flat).cloned();
        let locations = texts_of_stack.iter().map(|t| t.location.clone()).collect();
        let addresses = stack
            .frames
            .iter()
            .enumerate()
            .map(|(k, f)| if k == 0 { f.key } else { f.key.wrapping_add(1) })
            .collect();
        let row = StackRow {
            thread: None,
            leaf: frames.first().cloned(),
            user_frame,
            frames,
            locations,
            addresses,
            counts: stack.counts,
            rss: None,
        };
        match threads
            .get(i)
            .filter(|t| options.per_thread && !t.is_empty())
        {
            Some(per_thread) => {
                for t in per_thread {
                    out.push(StackRow {
                        thread: Some(i64::try_from(t.thread).unwrap_or(i64::MAX)),
                        counts: t.counts,
                        ..row.clone()
                    });
                }
            }
            None => out.push(row),
        }
    }
    out
}

/// Gives each row covering all threads of its stack the residency `rss` has for that stack,
/// found by the stack's addresses (sites of the same frames added up, as the dump's entries
/// are); a stack the figures do not name had no live sample, and counts zero. Per-thread rows
/// are left without: the figures are per stack, and a thread's share of them is not known.
pub fn attach_rss(rows: &mut [StackRow], rss: &RssFigures) {
    let mut by_stack: FastMap<&[u64], RowRss> = FastMap::default();
    let known = RowRss {
        resident: rss.pagemap.is_ok().then_some(ByteEstimate::default()),
        swapped: rss.pagemap.is_ok().then_some(ByteEstimate::default()),
        fragmentation: rss.slabs.is_some().then_some(ByteEstimate::default()),
    };
    for site in &rss.sites {
        let sum = by_stack.entry(&site.frames).or_insert(known);
        let add = |to: &mut Option<ByteEstimate>, figure: Option<&ByteEstimate>| {
            if let (Some(to), Some(figure)) = (to.as_mut(), figure) {
                to.add(figure);
            }
        };
        add(&mut sum.resident, Some(&site.resident));
        add(&mut sum.swapped, Some(&site.swapped));
        add(&mut sum.fragmentation, site.stranded.as_ref());
    }
    for row in rows.iter_mut().filter(|r| r.thread.is_none()) {
        row.rss = Some(
            by_stack
                .get(row.addresses.as_slice())
                .copied()
                .unwrap_or(known),
        );
    }
}

/// What one frame contributes to the rows of every stack holding it.
struct FrameText {
    /// What the charging engine makes of it (allocator frame or not).
    class: FrameClass,
    /// Its names in `frames`, innermost first, each with whether [`Attribution::user_code`]
    /// passes over it: none for a kernel address, inlined allocator names left out, inlined
    /// names suffixed ` (inline)`.
    names: Vec<(Arc<str>, bool)>,
    /// Its `locations` entry.
    location: Arc<str>,
}

impl FrameText {
    fn of(f: &Frame, skip: SkipRules, hide: &Attribution) -> FrameText {
        let mut names = Vec::new();
        if f.key <= LAST_USER_ADDRESS {
            let first = allocator_names_inlined(f, skip);
            let last = f.names.len().saturating_sub(1);
            for (j, name) in f.names.iter().enumerate().skip(first) {
                if name.is_empty() {
                    continue;
                }
                let name: Arc<str> = charge::row_name(name, j < last).into();
                let hidden = hide.hides(&name);
                names.push((name, hidden));
            }
        }
        FrameText {
            class: frame_class(f, skip),
            names,
            location: unsymbolized_identity(f.key, f.module.as_ref().map(|(p, o)| (&**p, *o)))
                .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jeprof_dumpfmt::maps::parse_maps;

    #[test]
    fn the_pid_comes_from_jemallocs_dump_names_only() {
        for (name, pid) in [
            ("jeprof.4242.0.i0.heap", Some(4242)),
            ("/var/tmp/app.v1.2.77.13.m3.heap", Some(77)),
            ("app.9.1.u12.heap", Some(9)),
            ("app.9.5.f.heap", Some(9)),
            ("9.5.f.heap", None),
            ("app.9.5.x1.heap", None),
            ("app.9.5.i.heap", None),
            ("app.x.5.f.heap", None),
            ("app.9.5.f.heap.gz", None),
            ("fleet-0001.heap", None),
        ] {
            assert_eq!(pid_from_name(Path::new(name)), pid, "{name}");
        }
    }

    #[test]
    fn the_program_is_the_one_executable_file_that_is_not_a_library() {
        let maps = "55d0c0a00000-55d0c1a00000 r-xp 00001000 08:01 12 /usr/bin/kv-store\n\
                    7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n\
                    7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]\n";
        assert_eq!(
            main_executable(&parse_maps(maps)).as_deref(),
            Some("kv-store")
        );
        let two =
            format!("{maps}56d0c0a00000-56d0c1a00000 r-xp 00001000 08:01 13 /usr/bin/other\n");
        assert_eq!(main_executable(&parse_maps(&two)), None);
        assert_eq!(main_executable(&[]), None);
    }
}
