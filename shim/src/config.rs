//! Settings: the `JEPROF_SHIM` variable, [`crate::configure`], and the atomics the profiler reads.
//!
//! Syntax is jemalloc's `MALLOC_CONF`: comma-separated `key:value` pairs. Every setting is an atomic
//! read on its own (no setting's meaning depends on another's), so every load and store here is
//! `Relaxed`: none of them publishes other memory.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::stack::{UnwinderChoice, MAX_FRAMES_LIMIT};

/// Default mean sampling period R: 512 KiB, jemalloc's `lg_prof_sample:19`.
pub const DEFAULT_SAMPLE_RATE: u64 = 1 << 19;
/// Default size of the reserved range behind the sampled arena: 64 GiB of address space.
pub const DEFAULT_ARENA_SIZE: usize = 64 << 30;
/// Default cap on distinct stacks.
pub const DEFAULT_MAX_STACKS: usize = 1 << 16;
/// Default number of frames kept per stack.
pub const DEFAULT_MAX_FRAMES: usize = 128;

/// Every setting, together in one cache line: the sampled path reads several of them per sample
/// (rate, activity, frame budget, unwinder, stack cap) and the settings generation, and one line
/// that stays cached costs less than five scattered statics that each miss once per sample.
#[repr(C, align(64))]
struct Settings {
    /// Bumped whenever the sample rate, activity or seed changes, so threads redraw their
    /// countdown ([`crate::sampler`]).
    generation: AtomicU64,
    sample_rate: AtomicU64,
    max_frames: AtomicUsize,
    arena_size: AtomicUsize,
    max_stacks: AtomicUsize,
    active: AtomicBool,
    symbolize: AtomicBool,
    unwinder: AtomicU8,
    /// What `unwinder:auto` resolved to: 0 not probed yet, 1 frame pointers work, 2 they do not.
    frame_pointer_probe: AtomicU8,
}

static SETTINGS: Settings = Settings {
    generation: AtomicU64::new(1),
    sample_rate: AtomicU64::new(DEFAULT_SAMPLE_RATE),
    max_frames: AtomicUsize::new(DEFAULT_MAX_FRAMES),
    arena_size: AtomicUsize::new(DEFAULT_ARENA_SIZE),
    max_stacks: AtomicUsize::new(DEFAULT_MAX_STACKS),
    active: AtomicBool::new(true),
    symbolize: AtomicBool::new(true),
    unwinder: AtomicU8::new(UnwinderChoice::Auto as u8),
    frame_pointer_probe: AtomicU8::new(0),
};

/// Where to dump at exit, if anywhere.
pub(crate) static DUMP_ON_EXIT: Mutex<Option<String>> = Mutex::new(None);

/// The mean sampling period in effect, 0 when sampling is off or inactive.
pub(crate) fn effective_sample_rate() -> u64 {
    // Ordering: a setting read on its own; it publishes no other memory.
    if SETTINGS.active.load(Ordering::Relaxed) {
        // Ordering: a setting read on its own; it publishes no other memory.
        SETTINGS.sample_rate.load(Ordering::Relaxed)
    } else {
        0
    }
}

/// The configured period R (even while inactive).
pub(crate) fn sample_rate() -> u64 {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.sample_rate.load(Ordering::Relaxed)
}

pub(crate) fn set_sample_rate(bytes: u64) {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.sample_rate.store(bytes, Ordering::Relaxed);
    crate::sampler::settings_changed();
}

pub(crate) fn active() -> bool {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.active.load(Ordering::Relaxed)
}

pub(crate) fn set_active(on: bool) {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.active.store(on, Ordering::Relaxed);
    crate::sampler::settings_changed();
}

pub(crate) fn max_frames() -> usize {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.max_frames.load(Ordering::Relaxed)
}

pub(crate) fn symbolize() -> bool {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.symbolize.load(Ordering::Relaxed)
}

pub(crate) fn unwinder_choice() -> UnwinderChoice {
    // Ordering: a setting read on its own; it publishes no other memory.
    UnwinderChoice::from_u8(SETTINGS.unwinder.load(Ordering::Relaxed))
}

/// What the frame-pointer probe found: 0 not run yet, 1 frame pointers work, 2 they do not.
pub(crate) fn frame_pointer_probe() -> u8 {
    // Ordering: a cached, idempotent probe result, read on its own.
    SETTINGS.frame_pointer_probe.load(Ordering::Relaxed)
}

pub(crate) fn set_frame_pointer_probe(result: u8) {
    // Ordering: racing probes store the same value; it publishes no other memory.
    SETTINGS
        .frame_pointer_probe
        .store(result, Ordering::Relaxed);
}

pub(crate) fn arena_size() -> usize {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.arena_size.load(Ordering::Relaxed)
}

/// The settings generation: see [`bump_generation`].
pub(crate) fn generation() -> u64 {
    // Ordering: a counter read on its own; the settings it announces are read with their own
    // loads.
    SETTINGS.generation.load(Ordering::Relaxed)
}

/// Announces that the sample rate, activity or seed changed: every thread redraws its countdown
/// at its next slow path.
pub(crate) fn bump_generation() {
    // Ordering: see `generation`; the counter carries no data.
    SETTINGS.generation.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn max_stacks() -> usize {
    // Ordering: a setting read on its own; it publishes no other memory.
    SETTINGS.max_stacks.load(Ordering::Relaxed)
}

/// Why a configuration string was (partly) rejected. Every valid pair of the string was applied;
/// each rejected pair is listed with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// One message per rejected `key:value` pair.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "jeprof-shim: invalid configuration: {}",
            self.problems.join("; ")
        )
    }
}

impl std::error::Error for ConfigError {}

/// Applies a `key:value,key:value` string (the `JEPROF_SHIM` syntax). Keys:
/// `sample_rate` (bytes, 0 = off), `active` (true/false), `seed` (u64), `max_frames` (1–256),
/// `symbolize` (true/false), `dump_on_exit` (a path; empty = none), `unwinder` (fp, backtrace,
/// auto), `arena_size` (bytes, rounded up to a power of two; only before the first sample), `max_stacks` (count ≥ 1).
pub(crate) fn apply(spec: &str) -> Result<(), ConfigError> {
    let mut problems = Vec::new();
    let mut rates_changed = false;
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once(':') else {
            problems.push(format!("`{pair}`: expected key:value"));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let result = match key {
            "sample_rate" => parse_u64(value).map(|v| {
                // Ordering: a setting read on its own; it publishes no other memory.
                SETTINGS.sample_rate.store(v, Ordering::Relaxed);
                rates_changed = true;
            }),
            "active" => parse_bool(value).map(|v| {
                // Ordering: a setting read on its own; it publishes no other memory.
                SETTINGS.active.store(v, Ordering::Relaxed);
                rates_changed = true;
            }),
            "seed" => parse_u64(value).map(|v| crate::sampler::set_seed(Some(v))),
            "max_frames" => parse_u64(value).and_then(|v| {
                if (1..=MAX_FRAMES_LIMIT as u64).contains(&v) {
                    // Ordering: a setting read on its own; it publishes no other memory.
                    SETTINGS.max_frames.store(v as usize, Ordering::Relaxed);
                    Ok(())
                } else {
                    Err(format!("must be between 1 and {MAX_FRAMES_LIMIT}"))
                }
            }),
            // Ordering: a setting read on its own; it publishes no other memory.
            "symbolize" => {
                parse_bool(value).map(|v| SETTINGS.symbolize.store(v, Ordering::Relaxed))
            }
            "dump_on_exit" => {
                let mut slot = DUMP_ON_EXIT.lock().unwrap_or_else(|e| e.into_inner());
                *slot = (!value.is_empty()).then(|| value.to_string());
                Ok(())
            }
            "unwinder" => match value {
                "fp" => Ok(UnwinderChoice::FramePointer),
                "backtrace" => Ok(UnwinderChoice::Backtrace),
                "auto" => Ok(UnwinderChoice::Auto),
                _ => Err("expected fp, backtrace or auto".to_string()),
            }
            // Ordering: a setting read on its own; it publishes no other memory.
            .map(|u| SETTINGS.unwinder.store(u as u8, Ordering::Relaxed)),
            "arena_size" => parse_u64(value).and_then(|v| {
                if crate::arena::reserved() {
                    Err("the sampled arena already exists; set it before the first sample".into())
                } else if v < (4 << 20) {
                    Err("must be at least 4194304 (jemalloc needs room for arena metadata)".into())
                } else {
                    // Ordering: a setting read on its own; it publishes no other memory.
                    SETTINGS.arena_size.store(v as usize, Ordering::Relaxed);
                    Ok(())
                }
            }),
            "max_stacks" => parse_u64(value).and_then(|v| {
                if v >= 1 {
                    // Ordering: a setting read on its own; it publishes no other memory.
                    SETTINGS.max_stacks.store(v as usize, Ordering::Relaxed);
                    Ok(())
                } else {
                    Err("must be at least 1".into())
                }
            }),
            _ => Err(
                "unknown key (known: sample_rate, active, seed, max_frames, symbolize, \
                 dump_on_exit, unwinder, arena_size, max_stacks)"
                    .to_string(),
            ),
        };
        if let Err(why) = result {
            problems.push(format!("`{pair}`: {why}"));
        }
    }
    if rates_changed {
        crate::sampler::settings_changed();
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError { problems })
    }
}

fn parse_u64(value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .map_err(|_| format!("`{value}` is not a non-negative integer"))
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("`{value}` is not true or false")),
    }
}

/// Reads `JEPROF_SHIM` (once, at first use) and applies it; bad pairs are reported on stderr and
/// left at their defaults.
pub(crate) fn apply_environment() {
    // SAFETY: the name is a NUL-terminated C string; getenv returns NULL or a pointer into the
    // environment that stays valid while nothing calls setenv (we copy it out immediately).
    let raw = unsafe { libc::getenv(c"JEPROF_SHIM".as_ptr()) };
    if raw.is_null() {
        return;
    }
    // SAFETY: non-null getenv results are NUL-terminated strings.
    let value = unsafe { std::ffi::CStr::from_ptr(raw) }
        .to_string_lossy()
        .into_owned();
    if let Err(e) = apply(&value) {
        eprintln!("{e} (in JEPROF_SHIM; those keys keep their defaults)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_keys_are_reported_and_good_ones_applied() {
        let err = apply("symbolize:false,bogus:1,max_frames:999").unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
        assert!(err.problems[0].contains("bogus"));
        assert!(err.problems[1].contains("max_frames"));
        assert!(!symbolize());
        apply("symbolize:true").unwrap();
        assert!(symbolize());
    }
}
