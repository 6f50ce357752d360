//! The sampled path (capture, allocate from the sampled arena, record), frees of sampled objects,
//! snapshots, statistics, and the fork and exit hooks.

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{MutexGuard, RwLockWriteGuard};

use jeprof_dumpfmt::{Counts, Profile, Stack, ThreadCounts};
use tikv_jemalloc_sys as jem;

use crate::accum::{self, ChargeError, ThreadTable, REGISTRY};
use crate::sampler::Guard;
use crate::stack::{Unwinder, UnwinderChoice, MAX_FRAMES_LIMIT};
use crate::table::{self, lock, LiveSample, LiveShard, StackTable, LIVE, SHARDS, STACKS};
use crate::{arena, config, sampler, stack, symbolize, Dropped, Stats, SymbolizerCost};

static INIT_STATE: AtomicU8 = AtomicU8::new(0);
const INIT_RUNNING: u8 = 1;
const INIT_DONE: u8 = 2;

static DROPPED_ARENA_EXHAUSTED: AtomicU64 = AtomicU64::new(0);
static DROPPED_ARENA_UNAVAILABLE: AtomicU64 = AtomicU64::new(0);
static DROPPED_STACK_TABLE_FULL: AtomicU64 = AtomicU64::new(0);
/// pid of the process that registered the exit hook (a forked child does not dump at exit).
static EXIT_HOOK_PID: AtomicU32 = AtomicU32::new(0);

/// Reads the environment and installs the fork and exit hooks, once per process, at first use.
#[inline]
pub(crate) fn ensure_init() {
    // Ordering: Acquire pairs with the Release store of INIT_DONE in `init`: a thread that sees
    // DONE sees the configuration it applied.
    if INIT_STATE.load(Ordering::Acquire) != INIT_DONE {
        init();
    }
}

#[cold]
fn init() {
    // Ordering: the compare-exchange only elects the initialising thread; what it publishes is
    // published by the Release store below. Others go on with the defaults meanwhile.
    if INIT_STATE
        .compare_exchange(0, INIT_RUNNING, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let _guard = Guard::enter();
    config::apply_environment();
    accum::create_exit_key();
    // jemalloc registers its own fork handlers when it initialises; make sure that happened
    // first, so ours (registered later) run *before* its prepare handler and after its
    // parent/child handlers: our locks are always taken before jemalloc's.
    // SAFETY: a plain one-byte allocation and, if it succeeded, its matching free.
    unsafe {
        let one = jem::mallocx(1, 0);
        if !one.is_null() {
            jem::dallocx(one, 0);
        }
    }
    // SAFETY: the three handlers are `extern "C" fn()` that live for the whole program.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    // Ordering: read only by the exit hook, in the same process, after this store.
    EXIT_HOOK_PID.store(std::process::id(), Ordering::Relaxed);
    // SAFETY: registers a function that lives for the whole program.
    unsafe { libc::atexit(dump_at_exit) };
    // Ordering: Release pairs with the Acquire load in `ensure_init`.
    INIT_STATE.store(INIT_DONE, Ordering::Release);
}

/// The unwinder in use now (resolving `auto` once).
pub(crate) fn current_unwinder() -> Unwinder {
    match config::unwinder_choice() {
        UnwinderChoice::FramePointer => Unwinder::FramePointer,
        UnwinderChoice::Backtrace => Unwinder::Backtrace,
        UnwinderChoice::Auto => {
            let mut probe = config::frame_pointer_probe();
            if probe == 0 {
                let _guard = Guard::enter();
                probe = if stack::frame_pointers_work() { 1 } else { 2 };
                config::set_frame_pointer_probe(probe);
            }
            if probe == 1 {
                Unwinder::FramePointer
            } else {
                Unwinder::Backtrace
            }
        }
    }
}

/// Allocates a sampled object from the sampled arena and records it. `None` when the sample is
/// dropped (the reason is counted); the caller then allocates from the inner allocator.
///
/// # Safety
/// `layout` has a non-zero size (the `GlobalAlloc::alloc` contract). `marker` is the address of a
/// local variable of the caller's frame (frames up to it are not recorded).
pub(crate) unsafe fn alloc_sampled(
    layout: Layout,
    zeroed: bool,
    period: u64,
    marker: usize,
) -> Option<*mut u8> {
    let _guard = Guard::enter();
    let mut buf = [const { MaybeUninit::<u64>::uninit() }; MAX_FRAMES_LIMIT];
    let max = config::max_frames().clamp(1, MAX_FRAMES_LIMIT);
    let frames = stack::capture_uninit(current_unwinder(), marker, &mut buf[..max]);

    let size = layout.size();
    let flags = match arena::flags(size, layout.align()) {
        Ok(flags) => flags,
        Err(arena::Unavailable::NoArena) => {
            // Ordering: a statistics counter.
            DROPPED_ARENA_UNAVAILABLE.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let zero = if zeroed { jem::MALLOCX_ZERO } else { 0 };
    // SAFETY: size is non-zero (caller contract) and the flags name a live arena.
    let ptr = unsafe { jem::mallocx(size, flags | zero) }.cast::<u8>();
    if ptr.is_null() {
        // Our extent hook is the only thing that fails in that arena: the range is exhausted.
        // Ordering: a statistics counter.
        DROPPED_ARENA_EXHAUSTED.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    // jemalloc's usable size. `nallocx` computes the size class that `mallocx` with this size and
    // alignment returns, which is what `sallocx` would read back from the allocation's metadata,
    // without that lookup (a cache miss or two on a path that runs every 512 KiB).
    // SAFETY: nallocx only computes a size class; size is non-zero.
    let usable = unsafe { jem::nallocx(size, arena::align_flags(size, layout.align())) };
    // SAFETY: ptr was just returned by mallocx.
    debug_assert_eq!(usable, unsafe { jem::sallocx(ptr.cast(), 0) });
    let estimate = table::sample_estimate(size, usable, period);
    let thread = sampler::thread_uid();

    let hash = table::stack_hash(frames);
    let charged = accum::this_thread().charge(frames, hash, &estimate, config::max_stacks());
    let stack_id = match charged {
        Ok(id) => id,
        Err(ChargeError::TableFull) => {
            // SAFETY: ptr came from mallocx with these flags and this size, and was never exposed.
            unsafe { jem::sdallocx(ptr.cast(), size, flags) };
            // Ordering: a statistics counter.
            DROPPED_STACK_TABLE_FULL.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let record = LiveSample {
        requested: size,
        usable,
        period,
        stack: stack_id,
        thread,
        scope: 0,
    };
    lock(table::shard_of(ptr as usize)).insert(ptr as usize, record);
    Some(ptr)
}

/// Forgets and frees a sampled object.
///
/// # Safety
/// `ptr` lies in the sampled arena ([`arena::RangeCopy::contains`]) and was allocated with
/// `layout` (the `GlobalAlloc::dealloc` contract).
pub(crate) unsafe fn free_sampled(ptr: *mut u8, layout: Layout) {
    lock(table::shard_of(ptr as usize)).remove(ptr as usize);
    let flags = arena::free_flags(layout.size(), layout.align());
    // SAFETY: ptr was allocated by mallocx in the sampled arena with this size and alignment
    // (caller contract), so this size and the same alignment flags free it; jemalloc finds the
    // arena from the object itself.
    unsafe { jem::sdallocx(ptr.cast(), layout.size(), flags) };
}

/// A consistent-per-shard copy of the profile. Not atomic across shards: frees racing a snapshot
/// may or may not be reflected.
pub(crate) fn snapshot(symbolize_now: bool) -> (Profile, Option<SymbolizerCost>) {
    let _guard = Guard::enter();
    let period = config::sample_rate();
    let mut live: Vec<LiveSample> = Vec::new();
    for shard in LIVE.iter() {
        let shard = lock(shard);
        live.reserve(shard.len());
        live.extend(shard.samples().copied());
    }
    let mut stacks: Vec<Stack> = {
        let table = lock(&STACKS);
        match table.as_ref() {
            None => Vec::new(),
            Some(table) => table
                .records
                .iter()
                .map(|r| Stack {
                    frames: frames_for_dump(&r.frames),
                    counts: Counts::default(),
                    threads: Vec::new(),
                })
                .collect(),
        }
    };
    // The thread tables, after the stack table's lock is released (lock order: tables first).
    // A stack interned since the copy above is left out, as a sample allocated since would be.
    for thread_table in thread_tables() {
        let thread_table = lock(thread_table);
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
    for sample in &live {
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
    stacks.retain(|s| !s.counts.is_zero());

    let mut profile = Profile::new(period);
    profile.stacks = stacks;
    profile.threads = profile.thread_summaries();
    profile.mapped_libraries = std::fs::read_to_string("/proc/self/maps").ok();
    let stats = stats();
    let unwinder = match current_unwinder() {
        Unwinder::FramePointer => "fp",
        Unwinder::Backtrace => "backtrace",
    };
    profile.annotations = vec![
        ("shim_unwinder".into(), unwinder.into()),
        ("shim_live_samples".into(), live.len().to_string()),
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
    ];
    let mut cost = None;
    if symbolize_now {
        let keys = profile.symbol_keys();
        let (symbols, c) = symbolize::symbol_table(&keys);
        profile.symbols = Some(symbols);
        profile.annotations.push((
            "shim_symbolizer_peak_bytes".into(),
            c.peak_bytes.to_string(),
        ));
        cost = Some(c);
    }
    (profile, cost)
}

/// Every thread table (a copy of the registry's list, so no lock is held while they are read).
fn thread_tables() -> Vec<&'static std::sync::Mutex<ThreadTable>> {
    lock(&REGISTRY).all.clone()
}

/// Frames as written to a dump: the innermost return address minus one (so it points into the
/// call instruction, and jeprof, which takes the first frame as an exact PC, finds the calling
/// line), every other frame as returned (jeprof subtracts one itself).
fn frames_for_dump(frames: &[u64]) -> Vec<u64> {
    let mut out = frames.to_vec();
    if let Some(first) = out.first_mut() {
        *first = first.saturating_sub(1);
    }
    out
}

/// Current statistics.
pub(crate) fn stats() -> Stats {
    let _guard = Guard::enter();
    let mut live_samples = 0u64;
    let mut metadata = 0usize;
    for shard in LIVE.iter() {
        let shard = lock(shard);
        live_samples += shard.len() as u64;
        metadata += shard.heap_bytes();
    }
    metadata += std::mem::size_of_val(&LIVE);
    let mut samples_taken = 0u64;
    let tables = thread_tables();
    let thread_tables = tables.len() as u64;
    for thread_table in tables {
        let thread_table = lock(thread_table);
        samples_taken += thread_table.samples_taken;
        metadata += thread_table.metadata_bytes();
    }
    let distinct_stacks = {
        let table = lock(&STACKS);
        match table.as_ref() {
            Some(t) => {
                metadata += t.metadata_bytes();
                t.records.len() as u64
            }
            None => 0,
        }
    };
    let (arena_used, arena_reserved) = arena::usage();
    // Ordering: statistics counters, read on their own.
    Stats {
        live_samples,
        distinct_stacks,
        metadata_bytes: metadata as u64,
        samples_taken,
        thread_tables,
        dropped: Dropped {
            // Ordering: a statistics counter or cached result, read on its own.
            arena_exhausted: DROPPED_ARENA_EXHAUSTED.load(Ordering::Relaxed),
            // Ordering: a statistics counter or cached result, read on its own.
            arena_unavailable: DROPPED_ARENA_UNAVAILABLE.load(Ordering::Relaxed),
            // Ordering: a statistics counter or cached result, read on its own.
            stack_table_full: DROPPED_STACK_TABLE_FULL.load(Ordering::Relaxed),
        },
        sample_rate: config::sample_rate(),
        active: config::active(),
        unwinder: current_unwinder(),
        arena_bytes_used: arena_used as u64,
        arena_bytes_reserved: arena_reserved as u64,
        last_symbolization: symbolize::last_cost(),
    }
}

/// Every profiler lock, held from `fork_prepare` to `fork_parent`/`fork_child`.
struct ForkHeld {
    _symbolize: MutexGuard<'static, ()>,
    _unwind: RwLockWriteGuard<'static, ()>,
    _arena: MutexGuard<'static, ()>,
    _dump_on_exit: MutexGuard<'static, Option<String>>,
    _registry: MutexGuard<'static, accum::Registry>,
    _tables: Vec<MutexGuard<'static, ThreadTable>>,
    _stacks: MutexGuard<'static, Option<StackTable>>,
    _live: [Option<MutexGuard<'static, LiveShard>>; SHARDS],
}

struct ForkSlot(UnsafeCell<Option<ForkHeld>>);

// SAFETY: the slot is written by `fork_prepare` only after it holds every profiler lock, and
// emptied by `fork_parent`/`fork_child` on the same thread before those locks are released (by
// that very emptying). Two forking threads are serialised by the locks themselves, so the slot is
// never accessed concurrently.
unsafe impl Sync for ForkSlot {}

static FORK_HELD: ForkSlot = ForkSlot(UnsafeCell::new(None));

extern "C" fn fork_prepare() {
    // Lock order, the same everywhere: symbolize → unwind → arena → dump_on_exit → registry →
    // thread tables → stacks → shards.
    let symbolize = lock(&symbolize::SYMBOLIZE_LOCK);
    let unwind = stack::UNWIND_LOCK
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let arena = lock(&arena::INIT_LOCK);
    let dump_on_exit = lock(&config::DUMP_ON_EXIT);
    let registry = lock(&REGISTRY);
    let tables = {
        // The list of guards is the one allocation here: keep it out of the profile.
        let _guard = Guard::enter();
        let mut tables = Vec::with_capacity(registry.all.len());
        tables.extend(registry.all.iter().map(|table| lock(table)));
        tables
    };
    let stacks = lock(&STACKS);
    let mut live: [Option<MutexGuard<'static, LiveShard>>; SHARDS] = [const { None }; SHARDS];
    for (slot, shard) in live.iter_mut().zip(LIVE.iter()) {
        *slot = Some(lock(shard));
    }
    let held = ForkHeld {
        _symbolize: symbolize,
        _unwind: unwind,
        _arena: arena,
        _dump_on_exit: dump_on_exit,
        _registry: registry,
        _tables: tables,
        _stacks: stacks,
        _live: live,
    };
    // SAFETY: see `ForkSlot`: we hold every lock, so no other thread touches the slot.
    unsafe { *FORK_HELD.0.get() = Some(held) };
}

extern "C" fn fork_parent() {
    // SAFETY: see `ForkSlot`; dropping the guards releases the locks.
    unsafe { drop((*FORK_HELD.0.get()).take()) };
}

extern "C" fn fork_child() {
    // SAFETY: see `ForkSlot`. The child has only this thread, which holds every lock; releasing
    // them leaves the child's profiler usable.
    unsafe { drop((*FORK_HELD.0.get()).take()) };
}

extern "C" fn dump_at_exit() {
    // Ordering: see `init`.
    if EXIT_HOOK_PID.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    let _guard = Guard::enter();
    let path = lock(&config::DUMP_ON_EXIT).clone();
    if let Some(path) = path {
        if let Err(e) = crate::dump(&path) {
            eprintln!("jeprof-shim: dump_on_exit to {path} failed: {e}");
        }
    }
}
