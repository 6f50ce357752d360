//! `otlp_push:URL`: every `otlp_interval`, a background thread takes the profile, encodes it as
//! an OpenTelemetry `ExportProfilesServiceRequest` ([`jeprof_dumpfmt::otlp`], from the same pprof
//! message [`crate::pprof`] returns) and POSTs it over OTLP/HTTP to `URL/v1development/profiles`
//! (`Content-Type: application/x-protobuf`; gzipped with `Content-Encoding: gzip` when
//! `otlp_compression:gzip`). Every request carries the shared dictionary, without which Grafana
//! Pyroscope refuses it.
//!
//! # A collector that is down or slow costs the process a bounded amount
//! - **Nothing waits for it but this thread.** The thread runs inside the re-entrancy guard (none
//!   of its allocations are sampled); it holds the profiler's locks only while the snapshot copies
//!   the tables, as a dump does, and no lock at all while it talks to the collector.
//! - **Timeouts.** Each attempt (connect, send, answer) ends after
//!   `min(10 s, otlp_interval / 2)` at most ([`attempt_timeout`]), so a collector that accepts and
//!   never answers holds the thread for that long, not for ever.
//! - **Bounded retries.** A failed attempt (no connection, a timeout, 429, 502, 503 or 504, the
//!   answers OTLP calls retryable) is retried after `1 s · 2^(k−1)` (k = 1, 2, 3), capped at half
//!   the interval; after [`MAX_ATTEMPTS`] attempts, or any other non-2xx answer (retrying cannot
//!   change it), the profile is dropped.
//! - **A queue of one.** One encoded request waits at most: when the next interval comes while it
//!   is still unsent, the new profile replaces it (the old one is counted as dropped), so the
//!   memory held for a dead collector is one profile's request, never a growing backlog.
//!
//! [`crate::Stats::otlp`] counts profiles built, sent, failed attempts, dropped and queued
//! ([`super::otlp_stats`]); the first failure after a success is said on stderr, once.
//!
//! The thread is started outside any allocation (before `main` when `JEPROF_SHIM` has
//! `otlp_push`, by [`crate::configure`], in a forked child), once per process, and ends when the
//! setting is cleared.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use jeprof_dumpfmt::otlp::{self, InstrumentationScope};

use super::otlp_stats::{Counters, COUNTERS};
use super::pprof::{self, PprofOptions};
use super::report;
use crate::base::settings;
use crate::base::sync::{lock, Wake};
use crate::base::thread::{self, Guard};

/// Attempts per profile: one try and three retries.
pub(crate) const MAX_ATTEMPTS: u32 = 4;

/// The longest an attempt may take, whatever the interval.
const MAX_ATTEMPT_TIME: Duration = Duration::from_secs(10);

/// The first retry's delay; each next one doubles it.
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// How long one attempt may take: `min(10 s, interval / 2)`, so that a collector that does not
/// answer never delays the next profile.
fn attempt_timeout(interval: Duration) -> Duration {
    MAX_ATTEMPT_TIME.min(interval / 2)
}

/// The wait before attempt `attempts + 1` after `attempts` failed ones:
/// `min(1 s · 2^(attempts−1), interval / 2)`.
fn retry_delay(attempts: u32, interval: Duration) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1 << attempts.saturating_sub(1).min(16));
    doubled.min(interval / 2)
}

/// pid of the process whose pusher thread runs (0: none).
static PUSHER_PID: AtomicU32 = AtomicU32::new(0);

/// Moved when a setting changes, so the pusher reads `otlp_push` and `otlp_interval` again.
static WAKE: Wake = Wake::new();

/// Starts this process's pusher if `otlp_push` asks for one and none runs. Call only outside an
/// allocation (it spawns a thread).
pub(crate) fn ensure_pusher() {
    // Ordering: SeqCst fence, paired with the pusher's as it stops (see `pusher`): either it
    // sees the URL set before this call, or this call sees PUSHER_PID cleared and starts one.
    fence(Ordering::SeqCst);
    if lock(&settings::OTLP_PUSH).is_none() {
        return;
    }
    thread::spawn_once_per_process(&PUSHER_PID, "jeprof-shim-otlp", "OTLP push", pusher);
}

/// After `configure`: the pusher reads changed settings at once, and one starts if asked for.
pub(crate) fn settings_changed() {
    WAKE.wake();
    ensure_pusher();
}

/// In a forked child: the parent's pusher does not exist here; the child starts its own (its
/// profiles carry its own pid).
pub(crate) fn after_fork_child() {
    ensure_pusher();
}

/// The scope the requests name: this crate and its version.
fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "jeprof-shim".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        ..InstrumentationScope::default()
    }
}

/// The current profile as an encoded request (symbolized when `symbolize` is on), gzipped when
/// `gzip`.
fn build(gzip: bool) -> Vec<u8> {
    let profile = report::snapshot(settings::symbolize()).0;
    let pb = pprof::encode(&profile, &PprofOptions::default());
    drop(profile);
    let body = otlp::encode(&otlp::from_pprof(&pb, &scope()));
    if gzip {
        otlp::gzip(&body)
    } else {
        body
    }
}

/// A request waiting to be sent.
struct Pending {
    body: Vec<u8>,
    /// Whether `body` is gzipped (as `otlp_compression` was when it was built).
    gzip: bool,
    /// Attempts made so far.
    attempts: u32,
    /// When the next attempt may start.
    next_attempt: Instant,
}

/// Why an attempt failed, and whether another could succeed.
struct Failure {
    why: String,
    retryable: bool,
}

/// One POST of `body` (gzipped when `gzip`) to `endpoint`, every phase bounded by `timeout`.
fn attempt(endpoint: &str, body: &[u8], gzip: bool, timeout: Duration) -> Result<(), Failure> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout))
        .timeout_send_request(Some(timeout))
        .timeout_send_body(Some(timeout))
        .timeout_recv_response(Some(timeout))
        .timeout_recv_body(Some(timeout))
        // A status is judged here (retryable or not); a redirect is not followed.
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("jeprof-shim/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut request = agent
        .post(endpoint)
        .header("Content-Type", "application/x-protobuf");
    if gzip {
        request = request.header("Content-Encoding", "gzip");
    }
    let response = request.send(body).map_err(|e| Failure {
        why: e.to_string(),
        retryable: true,
    })?;
    let status = response.status().as_u16();
    // The answer's body (an ExportProfilesServiceResponse, or an error) is not read: the
    // connection is not reused, and a partial success has nothing this thread could do about it.
    drop(response);
    match status {
        200..=299 => Ok(()),
        _ => Err(Failure {
            why: format!("the collector answered HTTP {status}"),
            retryable: matches!(status, 429 | 502 | 503 | 504),
        }),
    }
}

/// The pusher thread: a profile every `otlp_interval`, sent with retries, until `otlp_push` is
/// cleared.
fn pusher() {
    let _guard = Guard::enter();
    let mut last_profile = Instant::now();
    let mut pending: Option<Pending> = None;
    // Whether the current run of failures was said on stderr.
    let mut said = false;
    loop {
        // Read before the settings: a change after this read moves WAKE, and the wait returns.
        let seen = WAKE.seen();
        let url = lock(&settings::OTLP_PUSH).clone();
        let Some(url) = url else {
            let pid = std::process::id();
            // Ordering: see `ensure_pusher`.
            let _ = PUSHER_PID.compare_exchange(pid, 0, Ordering::Relaxed, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            // Set again meanwhile, and the caller saw this thread still running.
            if lock(&settings::OTLP_PUSH).is_some()
                && PUSHER_PID
                    .compare_exchange(0, pid, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                continue;
            }
            if pending.take().is_some() {
                Counters::bump(&COUNTERS.dropped);
                COUNTERS.set_queued(None);
            }
            return;
        };
        let interval = Duration::from_secs_f64(settings::otlp_interval());
        let now = Instant::now();
        if now >= last_profile + interval {
            let gzip = settings::otlp_gzip();
            let body = build(gzip);
            Counters::bump(&COUNTERS.profiles);
            if pending.is_some() {
                // Replaced before it could be sent: the queue holds one.
                Counters::bump(&COUNTERS.dropped);
            }
            COUNTERS.set_queued(Some(body.len()));
            pending = Some(Pending {
                body,
                gzip,
                attempts: 0,
                next_attempt: now,
            });
            last_profile = now;
        }
        if let Some(p) = pending.as_mut().filter(|p| now >= p.next_attempt) {
            let endpoint = format!("{url}{}", otlp::HTTP_PATH);
            let result = attempt(&endpoint, &p.body, p.gzip, attempt_timeout(interval));
            match result {
                Ok(()) => {
                    Counters::bump(&COUNTERS.sent);
                    pending = None;
                    COUNTERS.set_queued(None);
                    said = false;
                }
                Err(failure) => {
                    Counters::bump(&COUNTERS.failed_attempts);
                    p.attempts += 1;
                    let give_up = !failure.retryable || p.attempts >= MAX_ATTEMPTS;
                    if !said {
                        eprintln!(
                            "jeprof-shim: otlp_push to {endpoint} failed: {} ({}; \
                             stats().otlp counts what follows)",
                            failure.why,
                            if give_up {
                                "profile dropped"
                            } else {
                                "retrying"
                            }
                        );
                        said = true;
                    }
                    if give_up {
                        Counters::bump(&COUNTERS.dropped);
                        pending = None;
                        COUNTERS.set_queued(None);
                    } else {
                        p.next_attempt = Instant::now() + retry_delay(p.attempts, interval);
                    }
                }
            }
            continue;
        }
        let mut until = last_profile + interval;
        if let Some(p) = &pending {
            until = until.min(p.next_attempt);
        }
        WAKE.wait(seen, until.saturating_duration_since(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_never_outlasts_half_the_interval_nor_ten_seconds() {
        assert_eq!(
            attempt_timeout(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
        assert_eq!(
            attempt_timeout(Duration::from_secs(4)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn retries_back_off_doubling_from_a_second_capped_at_half_the_interval() {
        let minute = Duration::from_secs(60);
        let delays: Vec<u64> = (1..MAX_ATTEMPTS)
            .map(|k| retry_delay(k, minute).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4]);
        assert_eq!(
            retry_delay(3, Duration::from_secs(2)),
            Duration::from_secs(1)
        );
    }
}
