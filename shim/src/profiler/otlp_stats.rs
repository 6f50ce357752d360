//! What `otlp_push` has done, as counters the pusher thread bumps and [`crate::stats`] reads
//! ([`OtlpPushStats`]); all zero in a build without the `otlp` feature or without the setting.

use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use crate::api::otlp_stats::OtlpPushStats;

/// The counters. Each is read on its own (the figures are statistics, not a consistent cut).
pub(crate) struct Counters {
    pub(crate) profiles: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) failed_attempts: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) queued: AtomicU64,
    pub(crate) queued_bytes: AtomicU64,
}

pub(crate) static COUNTERS: Counters = Counters {
    profiles: AtomicU64::new(0),
    sent: AtomicU64::new(0),
    failed_attempts: AtomicU64::new(0),
    dropped: AtomicU64::new(0),
    queued: AtomicU64::new(0),
    queued_bytes: AtomicU64::new(0),
};

// Bumped by the pusher, which only a build with the `otlp` feature has.
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
impl Counters {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        // Ordering: a statistic read on its own; it publishes nothing.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the queue's figures (`bytes`: the queued request's size, `None`: the queue is empty).
    pub(crate) fn set_queued(&self, bytes: Option<usize>) {
        // Ordering: statistics, as above.
        self.queued
            .store(u64::from(bytes.is_some()), Ordering::Relaxed);
        // Ordering: as above.
        self.queued_bytes
            .store(bytes.unwrap_or(0) as u64, Ordering::Relaxed);
    }
}

/// The figures now.
pub(crate) fn read() -> OtlpPushStats {
    // Ordering: statistics, each read on its own.
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let c = &COUNTERS;
    OtlpPushStats {
        profiles: load(&c.profiles),
        sent: load(&c.sent),
        failed_attempts: load(&c.failed_attempts),
        dropped: load(&c.dropped),
        queued: load(&c.queued),
        queued_bytes: load(&c.queued_bytes),
    }
}
