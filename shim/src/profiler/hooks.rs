//! The fork and exit hooks.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{MutexGuard, RwLockWriteGuard};

use tikv_jemalloc_sys as jem;

use super::auto_dump;
use super::leak_history::{self, History, HISTORY};
use super::near_limit;
use super::peak::{LiveByStack, PeakSnapshot, LIVE_BY_STACK, PEAK};
use super::report;
use super::setting_values;
use crate::base::loader;
use crate::base::settings;
use crate::base::sync::{lock, FutexGuard};
use crate::base::thread::Guard;
use crate::parts::allocation_windows::{Windows, WINDOWS};
use crate::parts::cgroup::{self, Watched};
use crate::parts::live_samples::{LiveShard, LIVE, SHARDS};
use crate::parts::sampled_arena;
use crate::parts::scopes::{self, Names};
use crate::parts::stacks::{StackTable, STACKS};
use crate::parts::symbolize;
use crate::parts::thread_totals::{Registry, TableRef, ThreadTotals, REGISTRY};

/// pid of the process that registered the exit hook (a forked child does not dump at exit).
static EXIT_HOOK_PID: AtomicU32 = AtomicU32::new(0);

/// Registers the fork handlers and the exit hook; once, from the profiler's initialisation.
pub(super) fn install() {
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
}

/// Every profiler lock, held from `fork_prepare` to `fork_parent`/`fork_child`.
struct ForkHeld {
    _writing: MutexGuard<'static, ()>,
    _symbolize: MutexGuard<'static, ()>,
    _unwind: RwLockWriteGuard<'static, ()>,
    _arena: MutexGuard<'static, ()>,
    _dump_on_exit: MutexGuard<'static, Option<String>>,
    _dump_prefix: MutexGuard<'static, Option<String>>,
    _service: MutexGuard<'static, Option<String>>,
    _http_addr: MutexGuard<'static, Option<String>>,
    _otlp_push: MutexGuard<'static, Option<String>>,
    _scope_names: MutexGuard<'static, Names>,
    _written: MutexGuard<'static, VecDeque<(PathBuf, auto_dump::Kind)>>,
    _near_limit: MutexGuard<'static, Watched>,
    _windows: MutexGuard<'static, Windows>,
    _peak: MutexGuard<'static, Option<PeakSnapshot>>,
    _history: MutexGuard<'static, History>,
    _registry: MutexGuard<'static, Registry<TableRef>>,
    _tables: Vec<FutexGuard<'static, ThreadTotals>>,
    _stacks: MutexGuard<'static, Option<StackTable>>,
    _live: [Option<FutexGuard<'static, LiveShard>>; SHARDS],
    _live_by_stack: FutexGuard<'static, LiveByStack>,
}

struct ForkSlot(UnsafeCell<Option<ForkHeld>>);

// SAFETY: the slot is written by `fork_prepare` only after it holds every profiler lock, and
// emptied by `fork_parent`/`fork_child` on the same thread before those locks are released (by
// that very emptying). Two forking threads are serialised by the locks themselves, so the slot is
// never accessed concurrently.
unsafe impl Sync for ForkSlot {}

static FORK_HELD: ForkSlot = ForkSlot(UnsafeCell::new(None));

extern "C" fn fork_prepare() {
    // Lock order, the same everywhere: writing (a dump in progress) → symbolize → unwind → arena
    // → dump_on_exit → dump_prefix → service → http address (the listener starts under it) →
    // otlp_push's URL → scope names → written dumps → the near-limit watcher's state → windows → peak → leak history → registry →
    // thread tables → stacks → shards → the peak tracker's per-stack sums. (dump_prefix, service,
    // otlp_push's URL, written dumps, the near-limit state, windows, peak and the leak history are each taken with no
    // other profiler lock held.)
    // Taking `writing` waits for the writer's dump in progress, if any: the child must not
    // inherit it held.
    let writing = lock(&auto_dump::WRITING);
    let symbolize = lock(&symbolize::SYMBOLIZE_LOCK);
    let unwind = loader::UNWIND_LOCK
        .write()
        .unwrap_or_else(|e| e.into_inner());
    let arena = lock(&sampled_arena::INIT_LOCK);
    let dump_on_exit = lock(&settings::DUMP_ON_EXIT);
    let dump_prefix = lock(&settings::DUMP_PREFIX);
    let service = lock(&settings::SERVICE);
    let http_addr = lock(&settings::HTTP_ADDR);
    // The pusher reads it between pushes; the child's own pusher (started in `fork_child`) must
    // not find it held.
    let otlp_push = lock(&settings::OTLP_PUSH);
    // Held by others only with no other profiler lock (see `scopes::NAMES`), so anywhere in the
    // order is safe; here, with the other locks of that kind.
    let scope_names = lock(&scopes::NAMES);
    let written = lock(&auto_dump::WRITTEN);
    let near_limit = lock(&cgroup::STATE);
    let windows = lock(&WINDOWS);
    let peak = lock(&PEAK);
    let history = lock(&HISTORY);
    let registry = lock(&REGISTRY);
    let tables = {
        // The list of guards is the one allocation here: keep it out of the profile.
        let _guard = Guard::enter();
        let mut tables = Vec::with_capacity(registry.all.len());
        tables.extend(registry.all.iter().map(|table| table.lock()));
        tables
    };
    let stacks = lock(&STACKS);
    let mut live: [Option<FutexGuard<'static, LiveShard>>; SHARDS] = [const { None }; SHARDS];
    for (slot, shard) in live.iter_mut().zip(LIVE.iter()) {
        *slot = Some(shard.lock());
    }
    let live_by_stack = LIVE_BY_STACK.lock();
    let held = ForkHeld {
        _writing: writing,
        _symbolize: symbolize,
        _unwind: unwind,
        _arena: arena,
        _dump_on_exit: dump_on_exit,
        _dump_prefix: dump_prefix,
        _service: service,
        _http_addr: http_addr,
        _otlp_push: otlp_push,
        _scope_names: scope_names,
        _written: written,
        _near_limit: near_limit,
        _windows: windows,
        _peak: peak,
        _history: history,
        _registry: registry,
        _tables: tables,
        _stacks: stacks,
        _live: live,
        _live_by_stack: live_by_stack,
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
    auto_dump::after_fork_child();
    leak_history::after_fork_child();
    near_limit::after_fork_child();
    #[cfg(feature = "otlp")]
    super::otlp_push::after_fork_child();
}

extern "C" fn dump_at_exit() {
    let _guard = Guard::enter();
    let path = lock(&settings::DUMP_ON_EXIT).clone();
    // Ordering: see `install`.
    let own_process = EXIT_HOOK_PID.load(Ordering::Relaxed) == std::process::id();
    // A forked child inherits the setting and this hook: it dumps only when `%p` gives it a file
    // of its own, and never runs the parent's final sequenced dump.
    let path = path.filter(|path| own_process || path.contains("%p"));
    if let Some(path) = path.as_deref().map(setting_values::with_pid) {
        if let Err(e) = report::dump(Path::new(&path)) {
            eprintln!("jeprof-shim: dump_on_exit to {path} failed: {e}");
        }
    }
    if own_process {
        auto_dump::at_exit();
    }
}
