//! Memory per scope: the current scope (guards and the future wrapper), per-scope figures from the
//! live samples, per-scope dumps and the periodic report.
//!
//! Sampled attribution (`docs/design.md` §12): a sample records the scope current on its
//! thread; its free removes the record wherever it happens, so a scope's live estimate is the sum
//! of the live samples that carry its id, and memory moved between scopes stays charged to the one
//! that allocated it. Nothing of this runs on the fast path: the current scope is a field of the
//! thread state that only the sampled path reads.

use std::future::Future;
use std::marker::PhantomData;
use std::path::Path;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::Duration;

use jeprof_dumpfmt::Estimate;

use super::report;
use crate::base::settings;
use crate::base::thread::{self, Guard};
use crate::parts::{live_samples, scopes};

pub(crate) use crate::api::scopes::{Scope, ScopeGuard, ScopeReporter, ScopeStats, Scoped};

impl Scope {
    /// The scope named `label`, interned on first use.
    pub fn new(label: &str) -> Scope {
        // The first use of a label copies it: keep that allocation out of the profile.
        let _guard = Guard::enter();
        Scope(scopes::intern(label))
    }

    /// The label, `None` for [`Scope::NONE`].
    pub fn label(self) -> Option<&'static str> {
        scopes::label(self.0)
    }

    /// Makes this scope current on the calling thread until the guard drops, which restores the
    /// scope that was current before (so guards nest: the innermost wins).
    pub fn enter(self) -> ScopeGuard {
        ScopeGuard {
            previous: thread::replace_scope(self.0),
            _not_send: PhantomData,
        }
    }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        thread::replace_scope(self.previous);
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of `Scoped` (no method
        // hands it out by value or by `&mut` outside a `Pin`), `Scoped` has no `Drop` of its own,
        // and `Scoped<F>` is `Unpin` only when `F` is (its other field is `Copy` and `Unpin`).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.inner` stays where the pinned `Scoped` holds it.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let _scope = this.scope.enter();
        inner.poll(cx)
    }
}

/// Every scope that has allocated since start, in the order their labels were interned.
pub(crate) fn all_scopes() -> Vec<ScopeStats> {
    let _guard = Guard::enter();
    let labels = scopes::all();
    let mut live = vec![(Estimate::default(), 0u64); scopes::MAX_SCOPES];
    for shard in live_samples::LIVE.iter() {
        let shard = shard.lock();
        for sample in shard.samples() {
            let (total, n) = &mut live[sample.scope as usize];
            total.add(&sample.estimate());
            *n += 1;
        }
    }
    labels
        .into_iter()
        .filter_map(|(id, label)| {
            let (live, live_samples) = live[id as usize];
            let allocated = scopes::allocated(id);
            if live_samples == 0 && allocated.objects == 0.0 {
                return None;
            }
            Some(ScopeStats {
                label,
                live,
                live_bytes_interval: live.bytes_interval_95(),
                live_objects_interval: live.objects_interval_95(),
                allocated,
                live_samples,
            })
        })
        .collect()
}

/// The heap_v2 profile of `label`'s live samples (symbolized when `symbolize_now`); `None` if no
/// such label was interned.
pub(crate) fn scope_profile(label: &str, symbolize_now: bool) -> Option<jeprof_dumpfmt::Profile> {
    let id = scopes::find(label)?;
    let mut profile = report::snapshot_of(symbolize_now, Some(id)).0;
    profile
        .annotations
        .push(("shim_scope".into(), label.to_string()));
    Some(profile)
}

/// Writes `label`'s profile to `path` atomically; an error naming the label if it is unknown.
pub(crate) fn dump_scope(label: &str, path: &Path) -> Result<(), jeprof_dumpfmt::Error> {
    let _guard = Guard::enter();
    let profile =
        scope_profile(label, settings::symbolize()).ok_or_else(|| jeprof_dumpfmt::Error::Io {
            file: Some(path.to_path_buf()),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no scope labelled `{label}` has been entered in this process"),
            ),
        })?;
    jeprof_dumpfmt::write::write_file(&profile, path, &jeprof_dumpfmt::WriteOptions::default())
}

/// Calls `f` with every scope's figures every `interval` on a thread of its own.
pub(crate) fn scope_report(
    interval: Duration,
    mut f: impl FnMut(&[ScopeStats]) + Send + 'static,
) -> std::io::Result<ScopeReporter> {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("jeprof-scopes".into())
        .spawn(move || {
            // The sender is dropped (never sent on) to stop: a timeout means "report now".
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                f(&all_scopes());
            }
        })?;
    Ok(ScopeReporter {
        stop: Some(stop),
        thread: Some(thread),
    })
}
