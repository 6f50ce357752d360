//! The leak history: every `leak_interval`, a background thread copies the per-stack live sums
//! the peak tracker keeps ([`peak::LIVE_BY_STACK`]) into a ring of at most `leak_history`
//! snapshots, and [`find`] runs `jeprof_dumpfmt::leaks`'s test over the ring, so a running
//! process says which of its stacks are still growing without writing a dump.
//!
//! # What a snapshot holds, and the bound
//! Per stack with live samples: its id, the live bytes' estimate and variance (`f32`: 24
//! significant bits, far below the sampling noise), its sampled live objects and the samples it
//! had since start (`u32`, saturating: four billion samples of one stack, two petabytes at the
//! default rate) — an [`Entry`], 20 bytes. Only the [`LEAK_HISTORY_STACKS`] stacks with the most
//! live bytes are kept; a stack left out of a snapshot, or with nothing live then, reads as a
//! zero point there. The ring's heap is therefore at most
//! `leak_history × (LEAK_HISTORY_STACKS × 20 + 48)` bytes (48: a snapshot's times and slice),
//! 2,624,512 bytes at the defaults; [`History::heap_bytes`] gives what it holds now.
//!
//! # Recording
//! Off the allocation path, on its own thread, started when something first needs the history and
//! never inside an allocation: before `main` or by `configure` when `leak_interval` is given, with
//! the HTTP listener (whose `/debug/pprof/leaks` and page read it), at the first
//! [`crate::leak_suspects`] call or leaks request, and in a forked child whose parent had one. A
//! process that asks for none of these starts no thread (`docs/design.md` §10). Inside the
//! re-entrancy guard so none of it is sampled. The per-stack sums' lock is held only to copy the live entries out (the sampled path
//! waits at most that long); choosing the largest stacks, converting and storing happen after it
//! is released, under the history's own lock, which no allocation takes.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use jeprof_dumpfmt::charge::{
    charge_stack, Attribution, ChargedStack, NamedFrame, Objects, SkipRules,
};
use jeprof_dumpfmt::leaks::{self as test, LeakOptions, Plan, Point, Trend};
use jeprof_dumpfmt::model::symbol_key;

use super::peak::{self, StackFigures};
use crate::base::settings::{self, LEAK_HISTORY_STACKS, MAX_LEAK_HISTORY};
use crate::base::sync::{lock, Wake};
use crate::base::thread::{self, Guard};
use crate::parts::stacks::{self, STACKS};
use crate::parts::symbolize;

pub(crate) use crate::api::leak_history::{LeakHistoryError, LeakSuspect};

/// One stack's figures in one snapshot (20 bytes).
#[derive(Clone, Copy)]
#[repr(C)]
struct Entry {
    id: u32,
    bytes: f32,
    variance: f32,
    samples: u32,
    allocated: u32,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 20);

impl Entry {
    fn of(figures: &StackFigures) -> Entry {
        let count = |n: u64| n.min(u64::from(u32::MAX)) as u32;
        Entry {
            id: figures.id,
            bytes: figures.sum.bytes as f32,
            variance: figures.sum.bytes_variance as f32,
            samples: count(figures.samples),
            allocated: count(figures.allocated),
        }
    }

    fn point(&self) -> Point {
        Point {
            bytes: self.bytes.into(),
            variance: self.variance.into(),
            samples: self.samples.into(),
            allocated_samples: Some(self.allocated.into()),
        }
    }
}

/// One snapshot of the per-stack live sums.
struct Snapshot {
    /// When, on the monotonic clock (the test's times).
    at: Instant,
    /// When, on the wall clock (what `started` is reported in).
    taken: SystemTime,
    /// The stacks kept, by id ascending.
    entries: Box<[Entry]>,
}

/// The ring of snapshots.
pub(crate) struct History {
    /// Oldest first; at most `leak_history`.
    snapshots: VecDeque<Snapshot>,
    /// Snapshots recorded since start, the dropped ones included.
    recorded: u64,
}

impl History {
    /// Heap bytes held (capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.snapshots.capacity() * std::mem::size_of::<Snapshot>()
            + self
                .snapshots
                .iter()
                .map(|s| std::mem::size_of_val(&*s.entries))
                .sum::<usize>()
    }

    /// Snapshots recorded since start, the dropped ones included.
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded
    }
}

/// The history. Taken with no other profiler lock held; nothing allocates under it but the
/// recorder and [`find`], inside the re-entrancy guard.
pub(crate) static HISTORY: Mutex<History> = Mutex::new(History {
    snapshots: VecDeque::new(),
    recorded: 0,
});

/// Records one snapshot now (what the recorder thread does every `leak_interval`).
pub(crate) fn record() {
    let _guard = Guard::enter();
    let mut live = Vec::new();
    peak::copy_live(&mut live);
    if live.len() > LEAK_HISTORY_STACKS {
        live.select_nth_unstable_by(LEAK_HISTORY_STACKS - 1, |a, b| {
            b.sum.bytes.total_cmp(&a.sum.bytes)
        });
        live.truncate(LEAK_HISTORY_STACKS);
    }
    live.sort_unstable_by_key(|s| s.id);
    let snapshot = Snapshot {
        at: Instant::now(),
        taken: SystemTime::now(),
        entries: live.iter().map(Entry::of).collect(),
    };
    drop(live);
    let limit = settings::leak_history();
    let mut dropped = Vec::new();
    {
        let mut history = lock(&HISTORY);
        while history.snapshots.len() >= limit {
            match history.snapshots.pop_front() {
                Some(old) => dropped.push(old),
                None => break,
            }
        }
        // Exactly the ring's size, not the doubling `push_back` would do.
        let len = history.snapshots.len();
        if history.snapshots.capacity() > limit {
            history.snapshots.shrink_to(limit);
        } else {
            history.snapshots.reserve_exact(limit - len);
        }
        history.snapshots.push_back(snapshot);
        history.recorded += 1;
    }
    // The dropped snapshots are freed after the lock is released.
    drop(dropped);
}

/// pid of the process whose recorder thread runs (0: none).
static RECORDER_PID: AtomicU32 = AtomicU32::new(0);

/// Moved when a setting changes, so the recorder's wait ends and it reads `leak_interval` again.
static WAKE: Wake = Wake::new();

/// Starts this process's recorder thread if `leak_interval` asks for one and none runs. Call only
/// outside an allocation (it spawns a thread).
pub(crate) fn ensure_recorder() {
    // Ordering: SeqCst fence, paired with the recorder's before it reads `leak_interval` again
    // as it stops: either it sees the interval set before this call, or this call sees its
    // RECORDER_PID cleared and starts a new one (the two stores and two loads of a handshake).
    fence(Ordering::SeqCst);
    if settings::leak_interval() <= 0.0 {
        return;
    }
    thread::spawn_once_per_process(&RECORDER_PID, "jeprof-shim-leaks", "leak history", recorder);
}

/// Before `main` and after `configure`: wakes the recorder, which reads a changed `leak_interval`
/// at once instead of after its current wait, and starts one if `leak_interval` was given. Left
/// at its default, the setting starts nothing here: the recorder waits for its first reader.
pub(crate) fn settings_changed() {
    WAKE.wake();
    if settings::leak_interval_given() {
        ensure_recorder();
    }
}

/// The recorder thread: a snapshot every `leak_interval`, until the setting turns it off.
fn recorder() {
    let _guard = Guard::enter();
    let mut last = Instant::now();
    loop {
        // Read before the setting: a change after this read moves WAKE, and the wait returns.
        let seen = WAKE.seen();
        let interval = settings::leak_interval();
        if interval <= 0.0 {
            let pid = std::process::id();
            // Ordering: see `ensure_recorder`.
            let _ = RECORDER_PID.compare_exchange(pid, 0, Ordering::Relaxed, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            // Turned on again meanwhile, and the caller saw this thread still running.
            if settings::leak_interval() > 0.0
                && RECORDER_PID
                    .compare_exchange(0, pid, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                continue;
            }
            return;
        }
        let due = last + Duration::from_secs_f64(interval);
        let now = Instant::now();
        if now >= due {
            record();
            last = now;
        } else {
            WAKE.wait(seen, due - now);
        }
    }
}

/// In a forked child: the parent's recorder does not exist here; the child keeps the parent's
/// snapshots (its heap is the parent's) and starts its own recorder if the parent ran one.
pub(crate) fn after_fork_child() {
    // Ordering: the child has one thread; the slot holds the parent's pid if it started one.
    if RECORDER_PID.load(Ordering::Relaxed) != 0 {
        ensure_recorder();
    }
}

/// What the test found over the history.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) struct Found {
    /// The suspects with their trends (rates per second), fastest growing first.
    pub(crate) suspects: Vec<(LeakSuspect, Trend)>,
    /// Snapshots tested.
    pub(crate) snapshots: usize,
    /// Seconds from the first snapshot to the last.
    pub(crate) span: f64,
    /// Stacks tested.
    pub(crate) stacks: usize,
    /// Steps the test used.
    pub(crate) steps: usize,
}

/// The smallest number of snapshots, more than `have`, that the test can plan over when they are
/// evenly spaced; `None` beyond [`MAX_LEAK_HISTORY`].
fn snapshots_needed(have: usize, options: &LeakOptions) -> Option<usize> {
    (have.max(2) + 1..=MAX_LEAK_HISTORY).find(|&n| {
        let times: Vec<f64> = (0..n).map(|i| i as f64).collect();
        Plan::new(&times, options).is_ok()
    })
}

/// Runs the leak test over the history (module docs), the false discovery rate held over every
/// stack it holds.
pub(crate) fn find(options: &LeakOptions) -> Result<Found, LeakHistoryError> {
    let _guard = Guard::enter();
    options
        .validate()
        .map_err(|e| LeakHistoryError::Options(e.to_string()))?;
    let (tested, plan, taken) = {
        let history = lock(&HISTORY);
        let snapshots = &history.snapshots;
        let plan = plan_over(snapshots, options)?;
        let tested = trend_per_stack(snapshots, &plan);
        let taken: Vec<SystemTime> = snapshots.iter().map(|s| s.taken).collect();
        (tested, plan, taken)
    };
    let p_values: Vec<f64> = tested.iter().map(|(_, t)| t.p_value).collect();
    let found = test::benjamini_hochberg(&p_values, options.fdr);
    let mut suspects: Vec<(u32, Trend)> = tested
        .iter()
        .zip(found)
        .filter(|(_, found)| *found)
        .map(|(s, _)| *s)
        .collect();
    suspects.sort_by(|a, b| b.1.rate.total_cmp(&a.1.rate).then(a.0.cmp(&b.0)));
    let times = plan.times();
    Ok(Found {
        suspects: described(suspects, times, &taken),
        snapshots: plan.len(),
        span: times.last().copied().unwrap_or(0.0),
        stacks: tested.len(),
        steps: plan.steps(),
    })
}

/// The test's plan over the snapshots' times, or why there is none yet: the history is off, too
/// small for the test, or still too short (with when it will be long enough).
fn plan_over(
    snapshots: &VecDeque<Snapshot>,
    options: &LeakOptions,
) -> Result<Plan, LeakHistoryError> {
    let interval = settings::leak_interval();
    if snapshots.is_empty() && interval <= 0.0 {
        return Err(LeakHistoryError::Off);
    }
    let first = snapshots.front().map(|s| s.at);
    let times: Vec<f64> = snapshots
        .iter()
        .map(|s| first.map_or(0.0, |f| s.at.duration_since(f).as_secs_f64()))
        .collect();
    if let Ok(plan) = Plan::new(&times, options) {
        return Ok(plan);
    }
    let have = snapshots.len();
    let needed = snapshots_needed(have, options).unwrap_or(MAX_LEAK_HISTORY + 1);
    let limit = settings::leak_history();
    if needed > limit {
        return Err(LeakHistoryError::TooSmall {
            leak_history: limit,
            needed,
        });
    }
    if interval <= 0.0 {
        return Err(LeakHistoryError::Off);
    }
    let since_last = snapshots.back().map_or(Duration::ZERO, |s| s.at.elapsed());
    let ready_in =
        Duration::from_secs_f64(interval * (needed - have) as f64).saturating_sub(since_last);
    Err(LeakHistoryError::TooShort {
        snapshots: have,
        needed,
        ready_in,
    })
}

/// Each stack's trend over the snapshots, one stack at a time, merging the snapshots' id-sorted
/// entries: memory is one series, whatever the number of stacks.
fn trend_per_stack(snapshots: &VecDeque<Snapshot>, plan: &Plan) -> Vec<(u32, Trend)> {
    let n = snapshots.len();
    let mut cursors = vec![0usize; n];
    let mut series = vec![Point::default(); n];
    let mut tested: Vec<(u32, Trend)> = Vec::new();
    loop {
        let next = snapshots
            .iter()
            .zip(&cursors)
            .filter_map(|(s, &c)| s.entries.get(c).map(|e| e.id))
            .min();
        let Some(id) = next else { break };
        for ((snapshot, cursor), point) in snapshots.iter().zip(&mut cursors).zip(&mut series) {
            *point = match snapshot.entries.get(*cursor) {
                Some(e) if e.id == id => {
                    *cursor += 1;
                    e.point()
                }
                _ => Point::default(),
            };
        }
        tested.push((id, test::trend(plan, &series)));
    }
    tested
}

/// The suspects (stack ids with their trends) named and described: function and stack, rate and
/// live bytes with their intervals, and the wall-clock time growth started (`taken`: each
/// snapshot's, in the plan's order).
fn described(
    suspects: Vec<(u32, Trend)>,
    times: &[f64],
    taken: &[SystemTime],
) -> Vec<(LeakSuspect, Trend)> {
    let ids: Vec<u32> = suspects.iter().map(|(id, _)| *id).collect();
    let names = name_stacks(&ids);
    suspects
        .into_iter()
        .zip(names)
        .map(|((_, t), (function, stack))| {
            let started = times
                .iter()
                .position(|&x| x == t.started)
                .map_or(taken[0], |i| taken[i]);
            let suspect = LeakSuspect {
                function,
                stack,
                rate: t.rate,
                rate_95: (t.rate_low, t.rate_high),
                live_bytes: t.live,
                live_bytes_95: jeprof_dumpfmt::math::confidence_interval_95(
                    t.live,
                    t.live_variance,
                ),
                started,
                p_value: t.p_value,
            };
            (suspect, t)
        })
        .collect()
}

/// Live bytes over the history for the page (`/`): the seconds of each snapshot from the first,
/// and per user frame the live bytes of its stacks among the [`SERIES_STACKS`] with the most live
/// bytes at the last snapshot, at most `sites` user frames, the largest now first. `None` while
/// the history is empty.
#[cfg(feature = "http")]
pub(crate) fn series(sites: usize) -> Option<(Vec<f64>, Vec<SiteBytes>)> {
    let _guard = Guard::enter();
    let (times, ids, by_stack) = {
        let history = lock(&HISTORY);
        let snapshots = &history.snapshots;
        let first = snapshots.front()?.at;
        let last = snapshots.back()?;
        let times: Vec<f64> = snapshots
            .iter()
            .map(|s| s.at.duration_since(first).as_secs_f64())
            .collect();
        let mut largest: Vec<&Entry> = last.entries.iter().collect();
        largest.sort_unstable_by(|a, b| b.bytes.total_cmp(&a.bytes).then(a.id.cmp(&b.id)));
        largest.truncate(SERIES_STACKS);
        let ids: Vec<u32> = largest.iter().map(|e| e.id).collect();
        let by_stack: Vec<Vec<f64>> = ids
            .iter()
            .map(|&id| {
                snapshots
                    .iter()
                    .map(|s| {
                        s.entries
                            .binary_search_by_key(&id, |e| e.id)
                            .map_or(0.0, |i| f64::from(s.entries[i].bytes))
                    })
                    .collect()
            })
            .collect();
        (times, ids, by_stack)
    };
    let names = name_stacks(&ids);
    let mut grouped: Vec<SiteBytes> = Vec::new();
    for ((function, _), bytes) in names.into_iter().zip(by_stack) {
        match grouped.iter_mut().find(|(f, _)| *f == function) {
            Some((_, sum)) => sum.iter_mut().zip(&bytes).for_each(|(s, b)| *s += b),
            None => grouped.push((function, bytes)),
        }
    }
    grouped.sort_by(|a, b| {
        let now = |s: &[f64]| s.last().copied().unwrap_or(0.0);
        now(&b.1).total_cmp(&now(&a.1)).then_with(|| a.0.cmp(&b.0))
    });
    grouped.truncate(sites);
    Some((times, grouped))
}

/// One stack's live bytes (and variance) at an earlier snapshot and at the last, with its user
/// frame and functions (leaf first), for the page's "what grew" (`/?since=`).
#[cfg(feature = "http")]
pub(crate) struct StackChange {
    pub(crate) function: String,
    pub(crate) functions: Vec<String>,
    pub(crate) then: (f64, f64),
    pub(crate) now: (f64, f64),
}

/// What changed between the snapshot `since` before the last (the latest that old, else the
/// oldest) and the last: that snapshot's age before the last in seconds and its wall-clock time,
/// and every stack kept in either (the [`LEAK_HISTORY_STACKS`] with the most live bytes of each
/// snapshot) with its figures in both, a stack not kept in one counting zero there. `None` with
/// fewer than two snapshots.
#[cfg(feature = "http")]
pub(crate) fn growth_since(since: Duration) -> Option<(f64, SystemTime, Vec<StackChange>)> {
    /// A stack's bytes and their variance at one snapshot.
    type Figure = (f64, f64);
    let _guard = Guard::enter();
    let (age, taken, pairs) = {
        let history = lock(&HISTORY);
        let snapshots = &history.snapshots;
        let last = snapshots.back()?;
        let base = snapshots
            .iter()
            .take(snapshots.len() - 1)
            .rev()
            .find(|s| last.at.duration_since(s.at) >= since)
            .or_else(|| snapshots.front().filter(|s| s.at != last.at))?;
        let figure = |s: &Snapshot, id: u32| {
            s.entries
                .binary_search_by_key(&id, |e| e.id)
                .map_or((0.0, 0.0), |i| {
                    let e = &s.entries[i];
                    (f64::from(e.bytes), f64::from(e.variance))
                })
        };
        let mut ids: Vec<u32> = base
            .entries
            .iter()
            .chain(last.entries.iter())
            .map(|e| e.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let pairs: Vec<(u32, Figure, Figure)> = ids
            .into_iter()
            .map(|id| (id, figure(base, id), figure(last, id)))
            .collect();
        (
            last.at.duration_since(base.at).as_secs_f64(),
            base.taken,
            pairs,
        )
    };
    let ids: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let changes = name_stacks(&ids)
        .into_iter()
        .zip(pairs)
        .map(|((function, functions), (_, then, now))| StackChange {
            function,
            functions,
            then,
            now,
        })
        .collect();
    Some((age, taken, changes))
}

/// The ages of the history's snapshots before the last, in seconds, oldest first (the moments
/// the page offers to compare with).
#[cfg(feature = "http")]
pub(crate) fn ages() -> Vec<f64> {
    let _guard = Guard::enter();
    let history = lock(&HISTORY);
    let Some(last) = history.snapshots.back() else {
        return Vec::new();
    };
    history
        .snapshots
        .iter()
        .take(history.snapshots.len() - 1)
        .map(|s| last.at.duration_since(s.at).as_secs_f64())
        .collect()
}

/// A user frame and its live bytes at each snapshot.
#[cfg(feature = "http")]
pub(crate) type SiteBytes = (String, Vec<f64>);

/// The stacks [`series`] follows: enough to find the top user frames, few enough to symbolize
/// for every page.
#[cfg(feature = "http")]
const SERIES_STACKS: usize = 64;

/// The user frame and the functions (leaf first, allocator frames removed) of each stack,
/// symbolized in-process (only these stacks' frames are looked up) and charged by the workspace's
/// charging engine ([`jeprof_dumpfmt::charge`]), named as the page's sites are.
fn name_stacks(ids: &[u32]) -> Vec<(String, Vec<String>)> {
    let frames: Vec<&'static [u64]> = {
        let table = lock(&STACKS);
        ids.iter()
            .map(|&id| {
                table
                    .as_ref()
                    .and_then(|t| t.records.get(id as usize))
                    .map_or(&[][..], |r| r.frames)
            })
            .collect()
    };
    let keyed: Vec<Vec<u64>> = frames
        .iter()
        .map(|f| {
            stacks::frames_for_dump(f)
                .iter()
                .enumerate()
                .map(|(i, &a)| symbol_key(i, a))
                .collect()
        })
        .collect();
    let mut keys: Vec<u64> = keyed.iter().flatten().copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let (symbols, _) = symbolize::symbol_table(&keys);
    // The allocator's objects (a preloaded jemalloc, the preload library) by this process's
    // memory map, as the page's sites are charged ([`jeprof_page::charge`]).
    let maps = std::fs::read_to_string("/proc/self/maps").ok();
    let objects = Objects::from_maps_text(maps.as_deref());
    let attribution = Attribution::user_code();
    let no_names: Vec<String> = Vec::new();
    let mut frames: Vec<NamedFrame<'_>> = Vec::new();
    let mut charged = ChargedStack::default();
    keyed
        .iter()
        .map(|keys| {
            frames.clear();
            frames.extend(keys.iter().map(|&key| NamedFrame {
                key,
                names: symbols.names.get(&key).unwrap_or(&no_names),
                object: objects.at(key),
            }));
            charge_stack(&frames, SkipRules::default(), &attribution, &mut charged);
            let functions: Vec<String> = charged.functions.iter().map(|f| f.row_name()).collect();
            let function = charged
                .flat()
                .map_or_else(|| "(no frames)".to_string(), |f| f.row_name());
            (function, functions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evenly_spaced_snapshots_needed_follow_the_plan_s_rule() {
        // The default window (the last half) needs five evenly spaced snapshots for three
        // distinct checkpoints.
        let options = LeakOptions::default();
        assert_eq!(snapshots_needed(0, &options), Some(5));
        assert_eq!(snapshots_needed(4, &options), Some(5));
        assert_eq!(snapshots_needed(5, &options), Some(6));
    }

    #[test]
    fn an_entry_reads_back_as_the_point_it_was_made_from() {
        let figures = StackFigures {
            id: 7,
            samples: 3,
            allocated: u64::MAX,
            sum: jeprof_dumpfmt::Estimate {
                objects: 3.0,
                bytes: 1536.0,
                objects_variance: 0.0,
                bytes_variance: 4096.0,
            },
        };
        let point = Entry::of(&figures).point();
        assert_eq!(point.bytes, 1536.0);
        assert_eq!(point.variance, 4096.0);
        assert_eq!(point.samples, 3.0);
        assert_eq!(point.allocated_samples, Some(f64::from(u32::MAX)));
    }
}
