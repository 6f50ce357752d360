//! Run-time control: the `JEPROF_SHIM` variable and [`crate::configure`] (jemalloc's
//! `MALLOC_CONF` syntax: comma-separated `key:value` pairs), and the setters that also restart
//! the threads' countdowns.

use crate::base::settings::{self, UnwinderChoice};
use crate::base::sync::lock;
use crate::base::thread;
use crate::parts::capture::MAX_FRAMES_LIMIT;
use crate::parts::sampled_arena;

pub(crate) use crate::api::control::ConfigError;

/// Sets the mean sampling period R in bytes (0: off); every thread restarts its countdown.
pub(crate) fn set_sample_rate(bytes: u64) {
    settings::set_sample_rate(bytes);
    thread::restart_countdowns();
}

/// Turns sampling on or off without changing R; every thread restarts its countdown.
pub(crate) fn set_active(active: bool) {
    settings::set_active(active);
    thread::restart_countdowns();
}

/// Sets (or clears) the seed and restarts every thread's countdown from it.
pub(crate) fn reseed(seed: Option<u64>) {
    settings::set_seed(seed);
    thread::restart_countdowns();
}

/// Applies a `key:value,key:value` string (the `JEPROF_SHIM` syntax). The keys, their values and
/// defaults are the manual's settings table (the crate docs, `README.md`), and the error message
/// for an unknown key below names them all.
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
                settings::set_sample_rate(v);
                rates_changed = true;
            }),
            "active" => parse_bool(value).map(|v| {
                settings::set_active(v);
                rates_changed = true;
            }),
            "seed" => parse_u64(value).map(|v| reseed(Some(v))),
            "max_frames" => parse_u64(value).and_then(|v| {
                if (1..=MAX_FRAMES_LIMIT as u64).contains(&v) {
                    settings::set_max_frames(v as usize);
                    Ok(())
                } else {
                    Err(format!("must be between 1 and {MAX_FRAMES_LIMIT}"))
                }
            }),
            "symbolize" => parse_bool(value).map(settings::set_symbolize),
            "dump_on_exit" => dump_path(value).map(|path| *lock(&settings::DUMP_ON_EXIT) = path),
            "service" => service_name(value).map(|name| *lock(&settings::SERVICE) = name),
            "http" => http_address(value).map(|addr| *lock(&settings::HTTP_ADDR) = addr),
            "otlp_push" => otlp_url(value).map(|url| *lock(&settings::OTLP_PUSH) = url),
            "otlp_interval" => parse_interval(value).and_then(|seconds| {
                if seconds >= MIN_OTLP_INTERVAL {
                    settings::set_otlp_interval(seconds);
                    Ok(())
                } else {
                    Err(format!("must be from {MIN_OTLP_INTERVAL} to 86400 seconds"))
                }
            }),
            "unwinder" => match value {
                "fp" => Ok(UnwinderChoice::FramePointer),
                "backtrace" => Ok(UnwinderChoice::Backtrace),
                "eh_frame" => Ok(UnwinderChoice::EhFrame),
                "auto" => Ok(UnwinderChoice::Auto),
                _ => Err("expected fp, eh_frame, backtrace or auto".to_string()),
            }
            .map(settings::set_unwinder_choice),
            "arena_size" => parse_u64(value).and_then(|v| {
                if sampled_arena::reserved() {
                    Err("the sampled arena already exists; set it before the first sample".into())
                } else if v < (4 << 20) {
                    Err("must be at least 4194304 (jemalloc needs room for arena metadata)".into())
                } else if v > sampled_arena::MAX_RANGE as u64 {
                    Err(format!(
                        "must be at most {} (32 TiB: it is rounded up to a power of two and \
                         reserved twice over for alignment, inside a 47-bit address space)",
                        sampled_arena::MAX_RANGE
                    ))
                } else {
                    settings::set_arena_size(v as usize);
                    Ok(())
                }
            }),
            "max_stacks" => parse_u64(value).and_then(|v| {
                // Stack ids are 32-bit, two values kept back.
                let most = u64::from(u32::MAX) - 1;
                if (1..=most).contains(&v) {
                    settings::set_max_stacks(v as usize);
                    Ok(())
                } else {
                    Err(format!("must be between 1 and {most}"))
                }
            }),
            "dump_prefix" => dump_path(value).map(|prefix| *lock(&settings::DUMP_PREFIX) = prefix),
            "dump_interval" => parse_u64(value).map(settings::set_dump_interval),
            "dump_peak" => parse_factor(value, true).map(settings::set_dump_peak),
            "peak_growth" => parse_factor(value, false).map(settings::set_peak_growth),
            "max_dumps" => parse_u64(value).map(settings::set_max_dumps),
            "dump_final" => parse_bool(value).map(settings::set_dump_final),
            "leak_interval" => parse_interval(value).map(settings::set_leak_interval),
            "leak_history" => parse_u64(value).and_then(|v| {
                let most = settings::MAX_LEAK_HISTORY as u64;
                if (3..=most).contains(&v) {
                    settings::set_leak_history(v as usize);
                    Ok(())
                } else {
                    Err(format!("must be between 3 and {most}"))
                }
            }),
            _ => Err(
                "unknown key (known: sample_rate, active, seed, max_frames, symbolize, \
                 dump_on_exit, unwinder, arena_size, max_stacks, dump_prefix, dump_interval, \
                 dump_peak, peak_growth, max_dumps, dump_final, leak_interval, leak_history, service, \
                 http, otlp_push, otlp_interval)"
                    .to_string(),
            ),
        };
        if let Err(why) = result {
            problems.push(format!("`{pair}`: {why}"));
        }
    }
    if rates_changed {
        thread::restart_countdowns();
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError { problems })
    }
}

/// `dump_on_exit`'s path (and `dump_prefix`'s): empty for none; otherwise it must name a file in
/// a directory that exists now, so that a typo is reported when the setting is read and not, silently, at exit.
fn dump_path(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let expanded = with_pid(value);
    let path = std::path::Path::new(&expanded);
    if path.file_name().is_none() || expanded.ends_with('/') {
        return Err(format!("`{value}` names no file"));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(format!("the directory `{}` does not exist", dir.display()));
    }
    Ok(Some(value.to_string()))
}

/// A dump path setting as this process writes it: every `%p` replaced by the process id, so that
/// the children of a `fork` or an `exec` (which inherit the setting) write dumps of their own.
pub(crate) fn with_pid(path: &str) -> String {
    if path.contains("%p") {
        path.replace("%p", &std::process::id().to_string())
    } else {
        path.to_string()
    }
}

/// `service`'s name: empty for none; printable, without the `,` that would end the pair.
pub(crate) fn service_name(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.len() > 256 || value.chars().any(|c| c.is_control()) {
        return Err("must be at most 256 printable characters".to_string());
    }
    Ok(Some(value.to_string()))
}

/// `http`'s listening address (`host:port`, an IP address; empty for none). Refused without the
/// crate's `http` feature, so a setting that would silently serve nothing is reported.
fn http_address(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    if !cfg!(feature = "http") {
        return Err("this build of jeprof-shim has no `http` feature".to_string());
    }
    value
        .parse::<std::net::SocketAddr>()
        .map(|_| Some(value.to_string()))
        .map_err(|_| format!("`{value}` is not an IP address and port (e.g. 127.0.0.1:6060)"))
}

/// The shortest `otlp_interval`: each push takes a snapshot of the whole profile (and symbolizes
/// it when `symbolize` is on), which more than ten times a second would cost the process more than
/// any backend's resolution is worth.
const MIN_OTLP_INTERVAL: f64 = 0.1;

/// `otlp_push`'s base URL (empty for none): `http://host[:port][/prefix]`, to which the pusher
/// adds `/v1development/profiles`. Refused without the crate's `otlp` feature, and for `https`
/// (the client is built without TLS: push to a Collector on the host or in the pod).
fn otlp_url(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    if !cfg!(feature = "otlp") {
        return Err("this build of jeprof-shim has no `otlp` feature".to_string());
    }
    let Some(rest) = value.strip_prefix("http://") else {
        return Err(format!(
            "`{value}` is not an http:// URL (plain HTTP only: this build has no TLS; push to a \
             Collector on the host or in the pod)"
        ));
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "`{value}` names no host (e.g. http://127.0.0.1:4318)"
        ));
    }
    Ok(Some(value.trim_end_matches('/').to_string()))
}

fn parse_u64(value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .map_err(|_| format!("`{value}` is not a non-negative integer"))
}

/// A growth factor: finite, above 1 and at most 1000; 0 too (off) when `zero_is_off`.
fn parse_factor(value: &str, zero_is_off: bool) -> Result<f64, String> {
    let factor = value
        .parse::<f64>()
        .map_err(|_| format!("`{value}` is not a number"))?;
    if zero_is_off && factor == 0.0 {
        return Ok(0.0);
    }
    if factor.is_finite() && factor > 1.0 && factor <= 1000.0 {
        Ok(factor)
    } else if zero_is_off {
        Err("must be 0 (off) or a factor above 1 and at most 1000".to_string())
    } else {
        Err("must be a factor above 1 and at most 1000".to_string())
    }
}

/// `leak_interval`'s seconds: 0 (off), or from a millisecond to a day; fractions allowed.
fn parse_interval(value: &str) -> Result<f64, String> {
    let seconds = value
        .parse::<f64>()
        .map_err(|_| format!("`{value}` is not a number of seconds"))?;
    if seconds == 0.0 || (0.001..=86_400.0).contains(&seconds) {
        Ok(seconds)
    } else {
        Err("must be 0 (off) or from 0.001 to 86400 seconds".to_string())
    }
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
        assert!(!settings::symbolize());
        apply("symbolize:true").unwrap();
        assert!(settings::symbolize());
    }

    #[test]
    fn settings_that_would_silently_disable_profiling_are_refused_where_parsed() {
        let before = settings::arena_size();
        for bad in [
            "arena_size:18446744073709551615",
            "arena_size:70368744177665",
            "max_stacks:0",
            "max_stacks:4294967295",
            "dump_on_exit:/no/such/directory/heap.prof",
            "dump_on_exit:/tmp/",
            "sample_rate:-1",
            "active:yes",
            "dump_prefix:/no/such/directory/app",
            "dump_interval:1e9",
            "dump_peak:1",
            "dump_peak:nan",
            "peak_growth:0",
            "peak_growth:1.0",
            "max_dumps:-3",
            "dump_final:maybe",
            "leak_interval:-1",
            "leak_interval:nan",
            "leak_interval:100000",
            "leak_history:2",
            "leak_history:5000",
        ] {
            let err = apply(bad).unwrap_err();
            assert_eq!(err.problems.len(), 1, "{bad}: {err}");
        }
        assert_eq!(settings::arena_size(), before);
        assert!(lock(&settings::DUMP_ON_EXIT).is_none());
        assert!(lock(&settings::DUMP_PREFIX).is_none());
        assert_eq!(settings::dump_peak(), 0.0);
        assert_eq!(settings::peak_growth(), settings::DEFAULT_PEAK_GROWTH);
        assert_eq!(settings::leak_interval(), settings::DEFAULT_LEAK_INTERVAL);
        assert_eq!(settings::leak_history(), settings::DEFAULT_LEAK_HISTORY);
        apply("max_stacks:4294967294,max_stacks:65536").unwrap();
    }

    #[test]
    fn otlp_push_takes_a_plain_http_base_and_otlp_interval_a_tenth_of_a_second_to_a_day() {
        for bad in [
            "otlp_interval:0",
            "otlp_interval:0.05",
            "otlp_interval:100000",
        ] {
            let err = apply(bad).unwrap_err();
            assert!(err.problems[0].contains("otlp_interval"), "{bad}: {err}");
        }
        assert_eq!(settings::otlp_interval(), settings::DEFAULT_OTLP_INTERVAL);
        apply("otlp_interval:0.5").unwrap();
        assert_eq!(settings::otlp_interval(), 0.5);
        apply(&format!(
            "otlp_interval:{}",
            settings::DEFAULT_OTLP_INTERVAL
        ))
        .unwrap();

        let url = apply("otlp_push:http://127.0.0.1:4318/otel/");
        if cfg!(feature = "otlp") {
            url.unwrap();
            assert_eq!(
                lock(&settings::OTLP_PUSH).as_deref(),
                Some("http://127.0.0.1:4318/otel")
            );
            for bad in [
                "otlp_push:https://collector:4318",
                "otlp_push:http://",
                "otlp_push:4318",
            ] {
                let err = apply(bad).unwrap_err();
                assert_eq!(err.problems.len(), 1, "{bad}: {err}");
            }
            assert!(apply("otlp_push:https://c:4318").unwrap_err().problems[0].contains("TLS"));
            apply("otlp_push:").unwrap();
        } else {
            let err = url.unwrap_err();
            assert!(err.problems[0].contains("no `otlp` feature"), "{err}");
        }
        assert!(lock(&settings::OTLP_PUSH).is_none());
    }
}
