//! Scopes: the label, the guard and the future that make one current, its figures, and the
//! periodic report's handle.

use std::marker::PhantomData;
use std::sync::mpsc;

use jeprof_dumpfmt::Estimate;

/// A scope label, interned: a small id that is free to copy and to enter.
///
/// Build one once with [`Scope::new`] (or `From<&str>`) and enter it as often as needed; every
/// call with a new label takes a lock and, the first time, copies the label. At most 4,095
/// distinct labels per process: past that, [`Scope::new`] returns [`Scope::NONE`] (allocations in
/// it are charged to no scope) and [`crate::scope_labels_dropped`] counts the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scope(pub(crate) u16);

impl Scope {
    /// No scope: what threads start in.
    pub const NONE: Scope = Scope(0);
}

impl From<&str> for Scope {
    fn from(label: &str) -> Scope {
        Scope::new(label)
    }
}

/// The current scope on this thread until dropped ([`Scope::enter`]). Not `Send`: it restores this
/// thread's previous scope.
#[must_use = "the scope ends when the guard drops"]
#[derive(Debug)]
pub struct ScopeGuard {
    // Read by the guard's `Drop` on Linux; a guard restores nothing elsewhere.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) previous: u16,
    pub(crate) _not_send: PhantomData<*const ()>,
}

/// A future whose polls run in a scope ([`crate::scope`]): the scope is made current on whichever
/// thread polls it, for the poll, and the previous one restored after, so it follows the task
/// across a multi-threaded runtime's workers with no lookup on the allocation path.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Scoped<F> {
    // Entered around each poll on Linux; elsewhere a poll is the inner future's alone.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) scope: Scope,
    // SAFETY: structurally pinned: never moved out of `Scoped` nor handed out by `&mut` outside a
    // `Pin` (both polls project to it through the pin).
    pub(crate) inner: F,
}

impl<F> Scoped<F> {
    pub(crate) fn new(scope: Scope, inner: F) -> Scoped<F> {
        Scoped { scope, inner }
    }
}

/// One scope's figures ([`crate::scopes`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScopeStats {
    /// The scope's label.
    pub label: &'static str,
    /// Estimated live objects and bytes allocated in the scope (wherever and whenever freed), with
    /// variances.
    pub live: Estimate,
    /// 95% interval of the live bytes ([`Estimate::bytes_interval_95`]: the estimate ± 1.96
    /// standard deviations, floored at 0).
    pub live_bytes_interval: (f64, f64),
    /// 95% interval of the live objects.
    pub live_objects_interval: (f64, f64),
    /// Estimated objects and bytes allocated in the scope since start (freed or not).
    pub allocated: Estimate,
    /// Live samples behind `live`.
    pub live_samples: u64,
}

/// Stops the periodic report started by [`crate::scope_report`] when dropped (after the call in
/// progress, if any, returns).
#[derive(Debug)]
pub struct ScopeReporter {
    pub(crate) stop: Option<mpsc::Sender<()>>,
    pub(crate) thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ScopeReporter {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
