//! The settings: atomics, their getters and setters, nothing else (parsing `JEPROF_SHIM`, and
//! telling threads that a setting changed, is the profiler's, a layer up).
//!
//! Every setting is an atomic read on its own (no setting's meaning depends on another's), so
//! every load and store here is `Relaxed`: none of them publishes other memory.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Default mean sampling period R: 512 KiB, jemalloc's `lg_prof_sample:19`.
pub const DEFAULT_SAMPLE_RATE: u64 = 1 << 19;
/// Default size of the reserved range behind the sampled arena: 64 GiB of address space.
pub const DEFAULT_ARENA_SIZE: usize = 64 << 30;
/// Default cap on distinct stacks.
pub const DEFAULT_MAX_STACKS: usize = 1 << 16;
/// Default number of frames kept per stack.
pub const DEFAULT_MAX_FRAMES: usize = 128;
/// Default prefix of automatic and manual dumps' names, jemalloc's `prof_prefix` default.
pub const DEFAULT_DUMP_PREFIX: &str = "jeprof";
/// Default growth factor of the peak tracker: it re-snapshots when the estimated live bytes exceed
/// the last peak by 10%, tcmalloc's rule.
pub const DEFAULT_PEAK_GROWTH: f64 = 1.1;
/// Default seconds between the leak history's snapshots: a minute, so the default ring holds an
/// hour.
pub const DEFAULT_LEAK_INTERVAL: f64 = 60.0;
/// Default number of snapshots the leak history keeps.
pub const DEFAULT_LEAK_HISTORY: usize = 64;
/// The most snapshots `leak_history` may ask for (with [`LEAK_HISTORY_STACKS`] stacks each,
/// 4096 snapshots are at most 168 MB).
pub const MAX_LEAK_HISTORY: usize = 4096;
/// The most stacks one snapshot of the leak history keeps: those with the most live bytes.
pub const LEAK_HISTORY_STACKS: usize = 2048;
/// Default seconds between the profiles `otlp_push` sends: a minute, as OpenTelemetry's
/// exporters and most continuous profilers send.
pub const DEFAULT_OTLP_INTERVAL: f64 = 60.0;

/// The `unwinder` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum UnwinderChoice {
    /// `unwinder:auto`; as [`auto_unwinder`]'s outcome, not probed yet.
    Auto = 0,
    FramePointer = 1,
    Backtrace = 2,
    EhFrame = 3,
}

impl UnwinderChoice {
    fn from_u8(v: u8) -> UnwinderChoice {
        match v {
            1 => UnwinderChoice::FramePointer,
            2 => UnwinderChoice::Backtrace,
            3 => UnwinderChoice::EhFrame,
            _ => UnwinderChoice::Auto,
        }
    }
}

/// Every setting, together in one cache line: the sampled path reads several of them per sample
/// (rate, activity, frame budget, unwinder, stack cap), and one line that stays cached costs less
/// than five scattered statics that each miss once per sample.
#[repr(C, align(64))]
struct Settings {
    sample_rate: AtomicU64,
    /// The seed (meaningful when `seeded`).
    seed: AtomicU64,
    max_frames: AtomicUsize,
    arena_size: AtomicUsize,
    max_stacks: AtomicUsize,
    /// `dump_interval` in bytes (0: no interval dumps); read on every sample.
    dump_interval: AtomicU64,
    active: AtomicBool,
    seeded: AtomicBool,
    symbolize: AtomicBool,
    /// `rss`: whether a dump reads its live samples' residency and jemalloc's slab figures.
    rss: AtomicBool,
    unwinder: AtomicU8,
    /// What `unwinder:auto` resolved to, an [`UnwinderChoice`] (`Auto`: not probed yet); see
    /// [`auto_unwinder`].
    auto_unwinder: AtomicU8,
}

static SETTINGS: Settings = Settings {
    sample_rate: AtomicU64::new(DEFAULT_SAMPLE_RATE),
    seed: AtomicU64::new(0),
    max_frames: AtomicUsize::new(DEFAULT_MAX_FRAMES),
    arena_size: AtomicUsize::new(DEFAULT_ARENA_SIZE),
    max_stacks: AtomicUsize::new(DEFAULT_MAX_STACKS),
    dump_interval: AtomicU64::new(0),
    active: AtomicBool::new(true),
    seeded: AtomicBool::new(false),
    symbolize: AtomicBool::new(true),
    rss: AtomicBool::new(true),
    unwinder: AtomicU8::new(UnwinderChoice::Auto as u8),
    auto_unwinder: AtomicU8::new(0),
};

/// Where to dump at exit, if anywhere.
pub(crate) static DUMP_ON_EXIT: Mutex<Option<String>> = Mutex::new(None);

/// The service name the program gave (`service:<name>`, [`crate::set_service`]): a label on
/// every pprof profile, so a scraper can tell services apart.
pub(crate) static SERVICE: Mutex<Option<String>> = Mutex::new(None);

/// The address the `http` setting asked the listener to serve on (started outside any allocation;
/// see `serve`).
pub(crate) static HTTP_ADDR: Mutex<Option<String>> = Mutex::new(None);

/// `otlp_push`: the OTLP/HTTP base URL profiles are sent to (`None`: none).
pub(crate) static OTLP_PUSH: Mutex<Option<String>> = Mutex::new(None);

/// `dump_prefix`: the path prefix of sequenced dumps (`None`: [`DEFAULT_DUMP_PREFIX`]).
pub(crate) static DUMP_PREFIX: Mutex<Option<String>> = Mutex::new(None);

/// The settings of automatic dumps and the peak tracker that the sampled path does not read on
/// every sample (it reads `dump_interval`, in the line above).
struct AutoSettings {
    /// `dump_peak`'s factor as `f64` bits (0.0: no peak dumps).
    dump_peak: AtomicU64,
    /// `peak_growth` as `f64` bits.
    peak_growth: AtomicU64,
    /// `max_dumps` (0: keep every dump).
    max_dumps: AtomicU64,
    /// `dump_final`.
    dump_final: AtomicBool,
    /// `leak_interval` in seconds, as `f64` bits (0.0: no leak history).
    leak_interval: AtomicU64,
    /// Whether `leak_interval` was given (environment or `configure`), not left at its default:
    /// what starts the recorder before it is first needed.
    leak_interval_given: AtomicBool,
    /// `leak_history`: snapshots kept.
    leak_history: AtomicUsize,
    /// `otlp_interval` in seconds, as `f64` bits.
    otlp_interval: AtomicU64,
    /// `dump_near_limit`'s fraction of the memory limit as `f64` bits (0.0: off).
    dump_near_limit: AtomicU64,
    /// `otlp_compression:gzip`.
    otlp_gzip: AtomicBool,
}

static AUTO: AutoSettings = AutoSettings {
    dump_peak: AtomicU64::new(0),
    peak_growth: AtomicU64::new(DEFAULT_PEAK_GROWTH.to_bits()),
    max_dumps: AtomicU64::new(0),
    dump_final: AtomicBool::new(false),
    leak_interval: AtomicU64::new(DEFAULT_LEAK_INTERVAL.to_bits()),
    leak_interval_given: AtomicBool::new(false),
    leak_history: AtomicUsize::new(DEFAULT_LEAK_HISTORY),
    otlp_interval: AtomicU64::new(DEFAULT_OTLP_INTERVAL.to_bits()),
    dump_near_limit: AtomicU64::new(0),
    otlp_gzip: AtomicBool::new(false),
};

// Ordering, for every load and store below: a setting read on its own; it publishes no other
// memory.

/// The mean sampling period in effect, 0 when sampling is off or inactive.
pub(crate) fn effective_sample_rate() -> u64 {
    // Ordering: see above.
    if SETTINGS.active.load(Ordering::Relaxed) {
        // Ordering: see above.
        SETTINGS.sample_rate.load(Ordering::Relaxed)
    } else {
        0
    }
}

/// The configured period R (even while inactive).
pub(crate) fn sample_rate() -> u64 {
    // Ordering: see above.
    SETTINGS.sample_rate.load(Ordering::Relaxed)
}

pub(crate) fn set_sample_rate(bytes: u64) {
    // Ordering: see above.
    SETTINGS.sample_rate.store(bytes, Ordering::Relaxed);
}

pub(crate) fn active() -> bool {
    // Ordering: see above.
    SETTINGS.active.load(Ordering::Relaxed)
}

pub(crate) fn set_active(on: bool) {
    // Ordering: see above.
    SETTINGS.active.store(on, Ordering::Relaxed);
}

/// The seed, if one was set. A racing [`set_seed`] may be seen half-way, which only means a
/// thread picks up the new seed at its next settings epoch.
pub(crate) fn seed() -> Option<u64> {
    // Ordering: see above.
    let seeded = SETTINGS.seeded.load(Ordering::Relaxed);
    // Ordering: see above.
    seeded.then(|| SETTINGS.seed.load(Ordering::Relaxed))
}

pub(crate) fn set_seed(seed: Option<u64>) {
    // Ordering: see above and `seed`.
    SETTINGS.seed.store(seed.unwrap_or(0), Ordering::Relaxed);
    // Ordering: see above.
    SETTINGS.seeded.store(seed.is_some(), Ordering::Relaxed);
}

pub(crate) fn max_frames() -> usize {
    // Ordering: see above.
    SETTINGS.max_frames.load(Ordering::Relaxed)
}

pub(crate) fn set_max_frames(frames: usize) {
    // Ordering: see above.
    SETTINGS.max_frames.store(frames, Ordering::Relaxed);
}

pub(crate) fn symbolize() -> bool {
    // Ordering: see above.
    SETTINGS.symbolize.load(Ordering::Relaxed)
}

pub(crate) fn set_symbolize(on: bool) {
    // Ordering: see above.
    SETTINGS.symbolize.store(on, Ordering::Relaxed);
}

pub(crate) fn rss() -> bool {
    // Ordering: see above.
    SETTINGS.rss.load(Ordering::Relaxed)
}

pub(crate) fn set_rss(on: bool) {
    // Ordering: see above.
    SETTINGS.rss.store(on, Ordering::Relaxed);
}

pub(crate) fn unwinder_choice() -> UnwinderChoice {
    // Ordering: see above.
    UnwinderChoice::from_u8(SETTINGS.unwinder.load(Ordering::Relaxed))
}

pub(crate) fn set_unwinder_choice(choice: UnwinderChoice) {
    // Ordering: see above.
    SETTINGS.unwinder.store(choice as u8, Ordering::Relaxed);
}

/// What `unwinder:auto` resolved to: the stack-capture module probes the unwinders at first use
/// and stores the outcome here, `Auto` until then. It lives in the settings' cache line because the
/// sampled path reads it on every sample with the `unwinder` setting beside it.
pub(crate) fn auto_unwinder() -> UnwinderChoice {
    // Ordering: a cached, idempotent probe result, read on its own.
    UnwinderChoice::from_u8(SETTINGS.auto_unwinder.load(Ordering::Relaxed))
}

pub(crate) fn remember_auto_unwinder(outcome: UnwinderChoice) {
    // Ordering: racing probes store the same value; it publishes no other memory.
    SETTINGS
        .auto_unwinder
        .store(outcome as u8, Ordering::Relaxed);
}

pub(crate) fn arena_size() -> usize {
    // Ordering: see above.
    SETTINGS.arena_size.load(Ordering::Relaxed)
}

pub(crate) fn set_arena_size(bytes: usize) {
    // Ordering: see above.
    SETTINGS.arena_size.store(bytes, Ordering::Relaxed);
}

pub(crate) fn max_stacks() -> usize {
    // Ordering: see above.
    SETTINGS.max_stacks.load(Ordering::Relaxed)
}

pub(crate) fn set_max_stacks(stacks: usize) {
    // Ordering: see above.
    SETTINGS.max_stacks.store(stacks, Ordering::Relaxed);
}

/// Bytes of estimated allocation between interval dumps (0: none).
#[inline]
pub(crate) fn dump_interval() -> u64 {
    // Ordering: see above.
    SETTINGS.dump_interval.load(Ordering::Relaxed)
}

pub(crate) fn set_dump_interval(bytes: u64) {
    // Ordering: see above.
    SETTINGS.dump_interval.store(bytes, Ordering::Relaxed);
}

/// The factor by which the peak must grow past the last peak dump for another one (0: none).
pub(crate) fn dump_peak() -> f64 {
    // Ordering: see above.
    f64::from_bits(AUTO.dump_peak.load(Ordering::Relaxed))
}

pub(crate) fn set_dump_peak(factor: f64) {
    // Ordering: see above.
    AUTO.dump_peak.store(factor.to_bits(), Ordering::Relaxed);
}

/// The peak tracker's growth factor.
pub(crate) fn peak_growth() -> f64 {
    // Ordering: see above.
    f64::from_bits(AUTO.peak_growth.load(Ordering::Relaxed))
}

pub(crate) fn set_peak_growth(factor: f64) {
    // Ordering: see above.
    AUTO.peak_growth.store(factor.to_bits(), Ordering::Relaxed);
}

/// How many sequenced dumps the process keeps (0: all).
pub(crate) fn max_dumps() -> u64 {
    // Ordering: see above.
    AUTO.max_dumps.load(Ordering::Relaxed)
}

pub(crate) fn set_max_dumps(n: u64) {
    // Ordering: see above.
    AUTO.max_dumps.store(n, Ordering::Relaxed);
}

/// Whether a final `f` dump is written at exit.
pub(crate) fn dump_final() -> bool {
    // Ordering: see above.
    AUTO.dump_final.load(Ordering::Relaxed)
}

pub(crate) fn set_dump_final(on: bool) {
    // Ordering: see above.
    AUTO.dump_final.store(on, Ordering::Relaxed);
}

/// Seconds between the leak history's snapshots (0: none).
pub(crate) fn leak_interval() -> f64 {
    // Ordering: see above.
    f64::from_bits(AUTO.leak_interval.load(Ordering::Relaxed))
}

pub(crate) fn set_leak_interval(seconds: f64) {
    // Ordering: see above.
    AUTO.leak_interval
        .store(seconds.to_bits(), Ordering::Relaxed);
    // Ordering: see above.
    AUTO.leak_interval_given.store(true, Ordering::Relaxed);
}

/// Whether `leak_interval` was given rather than left at its default.
pub(crate) fn leak_interval_given() -> bool {
    // Ordering: see above.
    AUTO.leak_interval_given.load(Ordering::Relaxed)
}

/// How many snapshots the leak history keeps.
pub(crate) fn leak_history() -> usize {
    // Ordering: see above.
    AUTO.leak_history.load(Ordering::Relaxed)
}

pub(crate) fn set_leak_history(snapshots: usize) {
    // Ordering: see above.
    AUTO.leak_history.store(snapshots, Ordering::Relaxed);
}

/// Seconds between the profiles `otlp_push` sends (read by the pusher, which only a build with
/// the `otlp` feature has; the setting is parsed in every build).
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) fn otlp_interval() -> f64 {
    // Ordering: see above.
    f64::from_bits(AUTO.otlp_interval.load(Ordering::Relaxed))
}

pub(crate) fn set_otlp_interval(seconds: f64) {
    // Ordering: see above.
    AUTO.otlp_interval
        .store(seconds.to_bits(), Ordering::Relaxed);
}

/// The fraction of the memory limit at which a near-limit dump is written (0: off).
pub(crate) fn dump_near_limit() -> f64 {
    // Ordering: see above.
    f64::from_bits(AUTO.dump_near_limit.load(Ordering::Relaxed))
}

pub(crate) fn set_dump_near_limit(fraction: f64) {
    // Ordering: see above.
    AUTO.dump_near_limit
        .store(fraction.to_bits(), Ordering::Relaxed);
}

/// Whether `otlp_push` gzips its requests (`otlp_compression:gzip`; parsed in every build, read
/// by the pusher).
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) fn otlp_gzip() -> bool {
    // Ordering: see above.
    AUTO.otlp_gzip.load(Ordering::Relaxed)
}

pub(crate) fn set_otlp_gzip(gzip: bool) {
    // Ordering: see above.
    AUTO.otlp_gzip.store(gzip, Ordering::Relaxed);
}

/// Whether any setting asks for dumps written by the background writer (interval or peak).
pub(crate) fn wants_writer() -> bool {
    dump_interval() != 0 || dump_peak() > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwinder_choice_reads_back_as_stored() {
        for choice in [
            UnwinderChoice::Auto,
            UnwinderChoice::FramePointer,
            UnwinderChoice::Backtrace,
            UnwinderChoice::EhFrame,
        ] {
            assert_eq!(UnwinderChoice::from_u8(choice as u8), choice);
        }
    }
}
