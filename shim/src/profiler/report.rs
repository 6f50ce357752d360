//! Snapshots, statistics and dumps.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use jeprof_dumpfmt::{Counts, Estimate, Profile, ScopeStack, Stack, ThreadCounts};

use super::leak_history;
use super::otlp_stats;
use super::peak::{self, PEAK};
use super::sampled_path::dropped;
use crate::api::report::ListenerState;
use crate::base::hash::Map;
use crate::base::settings;
use crate::base::sync::lock;
use crate::base::thread::Guard;
use crate::parts::capture::{current_unwinder, Unwinder};
use crate::parts::live_samples::{self, LiveSample};
pub(crate) use crate::parts::stacks::frames_for_dump;
use crate::parts::symbolize::{self, SymbolizerCost};
use crate::parts::thread_totals::{TableRef, REGISTRY};
use crate::parts::{allocation_windows, sampled_arena, stacks, triggers};
use crate::parts::{build_ids, cgroup};

pub(crate) use crate::api::report::Stats;

/// A consistent-per-shard copy of the profile. Not atomic across shards: frees racing a snapshot
/// may or may not be reflected.
pub(crate) fn snapshot(symbolize_now: bool) -> (Profile, Option<SymbolizerCost>) {
    snapshot_of(symbolize_now, None)
}

/// [`snapshot`], or with `Some(scope)` the in-use figures of that scope's live samples only (no
/// accumulated figures: those are kept per stack and thread, not per scope).
pub(crate) fn snapshot_of(
    symbolize_now: bool,
    scope: Option<u16>,
) -> (Profile, Option<SymbolizerCost>) {
    let _guard = Guard::enter();
    // The statistics and the allocator's figures before this snapshot allocates its copies, so
    // that they describe the process as it was when the dump was asked for.
    let stats = stats();
    let figures = super::allocator::figures(stats.metadata_bytes);
    let period = settings::sample_rate();
    let live = live_copy(scope);
    let samples: Vec<LiveSample> = live.iter().map(|(_, s)| *s).collect();
    let mut stacks = stack_copy();
    // The thread tables, after the stack table's lock is released (lock order: tables first).
    // A stack interned since the copy above is left out, as a sample allocated since would be.
    if scope.is_none() {
        add_thread_totals(&mut stacks);
    }
    add_live(&mut stacks, &samples);
    // Before the stacks are filtered, while a sample's stack id still indexes them.
    let scopes = scope_stacks(&samples, &stacks);
    let rss = scope.is_none().then(|| super::rss::figures(&live, &stacks));
    stacks.retain(|s| !s.counts.is_zero());

    let mut profile = Profile::new(period);
    profile.stacks = stacks;
    profile.scopes = scopes;
    profile.threads = profile.thread_summaries();
    profile.mapped_libraries = std::fs::read_to_string("/proc/self/maps").ok();
    profile.annotations = shim_annotations(&stats, live.len());
    profile.annotations.extend(figures.to_annotations());
    if let Some(rss) = rss.flatten() {
        profile.annotations.extend(rss.to_annotations());
    }
    // Each loaded object's build id, named as the memory map above names it: what finds its debug
    // information when the dump is symbolized later (`jeprof-compat symbolize --debug-dir`).
    let maps = jeprof_dumpfmt::maps::parse_maps(profile.mapped_libraries.as_deref().unwrap_or(""));
    profile
        .annotations
        .extend(jeprof_dumpfmt::build_ids::to_annotations(
            &build_ids::named(&maps),
        ));
    profile.labels = super::pprof::dump_labels(std::time::SystemTime::now());
    let cost = symbolize_now.then(|| add_symbols(&mut profile));
    (profile, cost)
}

/// The live samples (of `scope` only, when given) with their addresses, copied one shard at a
/// time.
fn live_copy(scope: Option<u16>) -> Vec<(usize, LiveSample)> {
    let mut live: Vec<(usize, LiveSample)> = Vec::new();
    for shard in live_samples::LIVE.iter() {
        let shard = shard.lock();
        live.reserve(shard.len());
        live.extend(
            shard
                .entries()
                .filter(|(_, s)| scope.is_none_or(|id| s.scope == id))
                .map(|(a, s)| (a, *s)),
        );
    }
    live
}

/// Every interned stack's frames, as a dump writes them, with no figure yet; indexed by stack id.
fn stack_copy() -> Vec<Stack> {
    let table = lock(&stacks::STACKS);
    match table.as_ref() {
        None => Vec::new(),
        Some(table) => table
            .records
            .iter()
            .map(|r| Stack {
                frames: frames_for_dump(r.frames),
                counts: Counts::default(),
                threads: Vec::new(),
            })
            .collect(),
    }
}

/// Adds every thread table's accumulated figures to `stacks`, per stack and per thread.
fn add_thread_totals(stacks: &mut [Stack]) {
    for thread_table in thread_tables() {
        let thread_table = thread_table.lock();
        for (id, thread, accum) in thread_table.figures() {
            let Some(stack) = stacks.get_mut(id as usize) else {
                continue;
            };
            stack.counts.accum.add(&accum);
            // A (stack, thread) pair appears twice when part of it is still pending.
            match stack.threads.iter_mut().find(|t| t.thread == thread) {
                Some(t) => t.counts.accum.add(&accum),
                None => stack.threads.push(ThreadCounts {
                    thread,
                    counts: Counts {
                        inuse: Default::default(),
                        accum,
                    },
                }),
            }
        }
    }
}

/// Adds the live samples' in-use estimates to `stacks`, per stack and per thread.
fn add_live(stacks: &mut [Stack], live: &[LiveSample]) {
    for sample in live {
        let Some(stack) = stacks.get_mut(sample.stack as usize) else {
            continue;
        };
        let e = sample.estimate();
        stack.counts.inuse.add(&e);
        match stack.threads.iter_mut().find(|t| t.thread == sample.thread) {
            Some(t) => t.counts.inuse.add(&e),
            None => stack.threads.push(ThreadCounts {
                thread: sample.thread,
                counts: Counts {
                    inuse: e,
                    accum: Default::default(),
                },
            }),
        }
    }
}

/// Per scope and stack, the in-use figures of the scoped live samples, in stack then scope order
/// (so that dumps of the same heap are the same); `stacks` indexed by stack id.
fn scope_stacks(live: &[LiveSample], stacks: &[Stack]) -> Vec<ScopeStack> {
    let mut by_scope: Map<(u32, u16), Estimate> = Map::default();
    for sample in live.iter().filter(|s| s.scope != 0) {
        by_scope
            .entry((sample.stack, sample.scope))
            .or_default()
            .add(&sample.estimate());
    }
    let mut by_scope: Vec<((u32, u16), Estimate)> = by_scope.into_iter().collect();
    by_scope.sort_unstable_by_key(|(k, _)| *k);
    by_scope
        .into_iter()
        .filter_map(|((stack, scope), inuse)| {
            Some(ScopeStack {
                scope: crate::parts::scopes::label(scope)?.to_string(),
                frames: stacks.get(stack as usize)?.frames.clone(),
                inuse,
            })
        })
        .collect()
}

/// The dump's `shim_*` annotations: the unwinder, the live samples, the samples dropped and the
/// profiler's own metadata.
fn shim_annotations(stats: &Stats, live_samples: usize) -> Vec<(String, String)> {
    let unwinder = match current_unwinder() {
        Unwinder::FramePointer => "fp",
        Unwinder::Backtrace => "backtrace",
        Unwinder::EhFrame => "eh_frame",
    };
    vec![
        ("shim_unwinder".into(), unwinder.into()),
        ("shim_live_samples".into(), live_samples.to_string()),
        (
            "shim_samples_dropped_arena_exhausted".into(),
            stats.dropped.arena_exhausted.to_string(),
        ),
        (
            "shim_samples_dropped_arena_unavailable".into(),
            stats.dropped.arena_unavailable.to_string(),
        ),
        (
            "shim_samples_dropped_stack_table_full".into(),
            stats.dropped.stack_table_full.to_string(),
        ),
        (
            "shim_metadata_bytes".into(),
            stats.metadata_bytes.to_string(),
        ),
    ]
}

/// The allocator's figures now and the in-use total of the live samples, as
/// [`jeprof_dumpfmt::allocator::describe`] prints them: what `jeprof-compat report --allocator`
/// prints after its table for a dump taken at this moment (a dump's in-use total is the same sum,
/// per stack).
#[cfg(feature = "http")]
pub(crate) fn allocator_text() -> String {
    let _guard = Guard::enter();
    let figures = super::allocator::figures(stats().metadata_bytes);
    let mut inuse = Estimate::default();
    for shard in live_samples::LIVE.iter() {
        for sample in shard.lock().samples() {
            inuse.add(&sample.estimate());
        }
    }
    let mut text = jeprof_dumpfmt::allocator::describe(&figures, Some(&inuse), 1);
    text.push_str(&near_limit_text(&cgroup::stats()));
    text
}

/// `dump_near_limit`'s lines of `/debug/pprof/allocator`: the limit, the use and the last
/// near-limit dump.
#[cfg(feature = "http")]
fn near_limit_text(near: &crate::api::near_limit::NearLimitStats) -> String {
    use crate::api::near_limit::NearLimitWatch;
    let watch = match near.watch {
        NearLimitWatch::Off => return "near_limit: off (dump_near_limit)\n".into(),
        NearLimitWatch::NoLimit => {
            return "near_limit: no cgroup memory limit: nothing watched\n".into()
        }
        NearLimitWatch::Eventfd => "cgroup v1 thresholds (eventfd)",
        NearLimitWatch::Poll => "poll",
    };
    let mut text = format!(
        "near_limit_cgroup: {} (v{}, watched by {watch})\nnear_limit_limit: {} B\n\
         near_limit_use: {} B\nnear_limit_threshold: {} B (re-armed below {} B)\n\
         near_limit_dumps: {}\n",
        near.cgroup.as_deref().unwrap_or("?"),
        near.cgroup_version,
        near.limit_bytes,
        near.use_bytes,
        near.threshold_bytes,
        near.rearm_bytes,
        near.dumps,
    );
    if let Some(last) = &near.last_dump {
        text.push_str(&format!(
            "near_limit_last_dump: {} (use {} B, {:?}, unix_ms {}, written in {} us, {} B heap, \
             {} B file)\n",
            last.path.display(),
            last.use_bytes,
            last.signal,
            last.unix_ms,
            last.write_micros,
            last.heap_bytes,
            last.file_bytes,
        ));
    }
    text
}

/// Symbolizes `profile`'s frames in-process into its symbol section, noting the symbolizer's
/// peak in the annotations.
pub(crate) fn add_symbols(profile: &mut Profile) -> SymbolizerCost {
    let keys = profile.symbol_keys();
    let (symbols, cost) = symbolize::symbol_table(&keys);
    profile.symbols = Some(symbols);
    profile.annotations.push((
        "shim_symbolizer_peak_bytes".into(),
        cost.peak_bytes.to_string(),
    ));
    cost
}

/// Every thread table (a copy of the registry's list, so no lock is held while they are read).
fn thread_tables() -> Vec<TableRef> {
    lock(&REGISTRY).all.clone()
}

/// Current statistics.
pub(crate) fn stats() -> Stats {
    let _guard = Guard::enter();
    let mut live_samples = 0u64;
    let mut metadata = 0usize;
    for shard in live_samples::LIVE.iter() {
        let shard = shard.lock();
        live_samples += shard.len() as u64;
        metadata += shard.heap_bytes();
    }
    metadata += std::mem::size_of_val(&live_samples::LIVE);
    let mut samples_taken = 0u64;
    let tables = thread_tables();
    let thread_tables = tables.len() as u64;
    for thread_table in tables {
        let thread_table = thread_table.lock();
        samples_taken += thread_table.samples_taken;
        metadata += thread_table.metadata_bytes();
    }
    let distinct_stacks = {
        let table = lock(&stacks::STACKS);
        match table.as_ref() {
            Some(t) => {
                metadata += t.metadata_bytes();
                t.records.len() as u64
            }
            None => 0,
        }
    };
    let (peak_bytes_estimate, peak_tracker_bytes) = match lock(&PEAK).as_ref() {
        Some(p) => (p.live_bytes, p.heap_bytes()),
        None => (0, 0),
    };
    // The per-stack sums the snapshots are copied from belong to the tracker too.
    let peak_tracker_bytes = peak_tracker_bytes + peak::LIVE_BY_STACK.lock().heap_bytes();
    metadata += peak_tracker_bytes;
    metadata += allocation_windows::heap_bytes();
    let (leak_history_bytes, leak_snapshots) = {
        let history = lock(&leak_history::HISTORY);
        (history.heap_bytes(), history.recorded())
    };
    metadata += leak_history_bytes;
    let (arena_used, arena_reserved) = sampled_arena::usage();
    Stats {
        live_samples,
        distinct_stacks,
        metadata_bytes: metadata as u64,
        samples_taken,
        thread_tables,
        dropped: dropped(),
        sample_rate: settings::sample_rate(),
        active: settings::active(),
        unwinder: current_unwinder(),
        arena_bytes_used: arena_used as u64,
        arena_bytes_reserved: arena_reserved as u64,
        last_symbolization: symbolize::last_cost(),
        allocated_bytes_estimate: triggers::allocated_bytes(),
        live_bytes_estimate: triggers::live_bytes(),
        peak_bytes_estimate,
        peak_snapshots: peak::snapshots_taken(),
        peak_tracker_bytes: peak_tracker_bytes as u64,
        leak_history_bytes: leak_history_bytes as u64,
        leak_snapshots,
        otlp: otlp_stats::read(),
        http_listener: listener_state(),
        near_limit: cgroup::stats(),
    }
}

/// The `http` setting's listener: the address it was asked for (so that the same address is not
/// bound twice) and how its start went. Written by the listener's start, read by [`stats`]; both
/// lock it only while holding `settings::HTTP_ADDR`, which the fork handlers hold, so a child
/// never inherits it locked.
pub(crate) static HTTP_LISTENER: Mutex<(Option<String>, ListenerState)> =
    Mutex::new((None, ListenerState::NotAsked));

fn listener_state() -> ListenerState {
    let _http_addr = lock(&settings::HTTP_ADDR);
    lock(&HTTP_LISTENER).1
}

/// Writes the current profile in heap_v2 format to `out`.
pub(crate) fn dump_to(out: &mut dyn Write) -> Result<(), jeprof_dumpfmt::Error> {
    let _guard = Guard::enter();
    let profile = snapshot(settings::symbolize()).0;
    jeprof_dumpfmt::write::write(&profile, out, &jeprof_dumpfmt::WriteOptions::default())
}

/// Writes the current profile to `path` atomically (a temporary file beside it, mode 0600, then
/// renamed over `path`).
pub(crate) fn dump(path: &Path) -> Result<(), jeprof_dumpfmt::Error> {
    let _guard = Guard::enter();
    let profile = snapshot(settings::symbolize()).0;
    jeprof_dumpfmt::write::write_file(&profile, path, &jeprof_dumpfmt::WriteOptions::default())
}
