//! What `otlp_push` has done ([`crate::Stats::otlp`]).

/// The pusher's figures since start ([`crate::Stats::otlp`]). Every profile built is sent,
/// dropped, or queued (at most one): `profiles = sent + dropped + queued`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpPushStats {
    /// Profiles (requests) built, one per `otlp_interval`.
    pub profiles: u64,
    /// Requests the collector accepted (a 2xx answer).
    pub sent: u64,
    /// Attempts that failed: no connection, a timeout, or an answer other than 2xx. At most
    /// four per profile (one try and three retries).
    pub failed_attempts: u64,
    /// Profiles given up: retries exhausted, an answer that retrying cannot change (a 4xx other
    /// than 429), or replaced by a newer profile before they could be sent.
    pub dropped: u64,
    /// Profiles waiting to be sent: 0 or 1 (the queue holds one; a newer replaces it).
    pub queued: u64,
    /// Bytes of the queued profile's encoded request (0 when none waits): what a collector that
    /// does not answer costs the process, at most one profile.
    pub queued_bytes: u64,
}
