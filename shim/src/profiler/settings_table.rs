//! The settings table: every key of `JEPROF_SHIM` and [`crate::configure`] once, with its
//! default, its line of the manual and the function that parses a value and stores it into the
//! settings' atomics (`base::settings`, whose cache line the sampled path reads unchanged).
//!
//! From [`SETTINGS`] are made: the one reader of the environment ([`read_environment`]), the
//! parser of `configure`'s string ([`apply`]), the list of known keys in the unknown-key error,
//! and the manual's table ([`markdown`], held to `README.md` by a test). The threads a setting
//! asks for are started from the parsed values (`crate::startup`), never from the text.
//!
//! A plain `static` slice of structs rather than a macro: a newcomer reads one entry as data (key,
//! default, doc, parser), the parser is a closure beside its key, and the functions that walk the
//! table are ordinary code. Adding a setting is one entry here (plus its atomic in
//! `base::settings` when the profiler reads it). This module and `base::settings` are the only
//! places that write a setting: a test scans the sources for any other.

use std::sync::atomic::{AtomicBool, Ordering};

use super::setting_values as values;
use crate::base::settings::{self, UnwinderChoice};
use crate::base::sync::lock;
use crate::base::thread;
use crate::parts::capture::MAX_FRAMES_LIMIT;
use crate::parts::sampled_arena;

pub(crate) use crate::api::control::ConfigError;

/// One setting: its key, its default as the manual shows it, the manual's line, and the function
/// that parses a value and applies it (or says why not, leaving the setting as it was).
pub(crate) struct Setting {
    pub(crate) key: &'static str,
    /// Read by [`markdown`], which the manual's test runs.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) default: &'static str,
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) doc: &'static str,
    pub(crate) apply: fn(&str) -> Result<(), String>,
}

/// Every setting, in the manual's order.
pub(crate) static SETTINGS: &[Setting] = &[
    Setting {
        key: "sample_rate",
        default: "`524288`",
        doc: "Mean sampling period R in bytes (a size: `512k` is the default). `0` turns sampling \
            off.",
        apply: |v| values::size(v).map(set_sample_rate),
    },
    Setting {
        key: "active",
        default: "`true`",
        doc: "`false` stops sampling without changing R; live samples stay recorded and are still \
            removed when freed.",
        apply: |v| values::boolean(v).map(set_active),
    },
    Setting {
        key: "seed",
        default: "none",
        doc: "Makes sampling deterministic: thread *k* (in the order threads first reach the \
            sampler) draws from a generator seeded with the seed and *k*, and the profiler's own \
            allocations do not consume the countdown, so a deterministic program samples the same \
            allocations on every run. Without it, generators start from address and clock \
            entropy.",
        apply: |v| values::count_in(v, 0, u64::MAX).map(|s| reseed(Some(s))),
    },
    Setting {
        key: "max_frames",
        default: "`128`",
        doc: "Frames kept per stack, 1 to 256.",
        apply: |v| {
            let n = values::count_in(v, 1, MAX_FRAMES_LIMIT as u64)?;
            settings::set_max_frames(n as usize);
            Ok(())
        },
    },
    Setting {
        key: "symbolize",
        default: "`true`",
        doc: "Write a `--- symbol` section resolved in-process, so jeprof needs no binary.",
        apply: |v| values::boolean(v).map(settings::set_symbolize),
    },
    Setting {
        key: "rss",
        default: "`true`",
        doc: "At each dump, read the live samples' pages in `/proc/self/pagemap` and jemalloc's \
            per-bin statistics: per stack the resident and swapped bytes and the stranded slab \
            bytes (`# rss_*` annotations; [Where the resident memory is](#where-the-resident-memory-is)).",
        apply: |v| values::boolean(v).map(settings::set_rss),
    },
    Setting {
        key: "dump_on_exit",
        default: "none",
        doc: "Dump to this path from an `atexit` handler, only in the process that read the \
            setting (a forked child does not overwrite its parent's dump) unless the path has \
            `%p`: then a forked child dumps to a file of its own. The path must name a file, not \
            a directory, in a directory that exists and can be written when the setting is read; \
            empty: none.",
        apply: |v| values::dump_path(v).map(|p| *lock(&settings::DUMP_ON_EXIT) = p),
    },
    Setting {
        key: "unwinder",
        default: "`auto`",
        doc: "`fp`, `eh_frame`, `backtrace` or `auto` ([Unwinders](#unwinders)).",
        apply: |v| {
            let choice = match v {
                "fp" => UnwinderChoice::FramePointer,
                "backtrace" => UnwinderChoice::Backtrace,
                "eh_frame" => UnwinderChoice::EhFrame,
                "auto" => UnwinderChoice::Auto,
                _ => return Err("expected fp, eh_frame, backtrace or auto".to_string()),
            };
            settings::set_unwinder_choice(choice);
            Ok(())
        },
    },
    Setting {
        key: "arena_size",
        default: "64 GiB",
        doc: "Address space reserved for the sampled arena (no memory is committed until used; a \
            size such as `4G`): rounded up to a power of two, from 4 MiB to 32 TiB. Only before \
            the first sample. Where the default cannot be reserved (under valgrind or `ulimit \
            -v`, for instance) the largest power of two down to 4 MiB that can is taken, and one \
            line on stderr says what was reserved. A size set here is taken as asked or not at \
            all: if it cannot be reserved, one line on stderr says so and every sample is dropped \
            and counted (`stats().dropped.arena_unavailable`).",
        apply: |v| values::size(v).and_then(set_arena_size),
    },
    Setting {
        key: "max_stacks",
        default: "`65536`",
        doc: "Cap on distinct stacks (1 to 4294967294); a sample with a new stack beyond it is \
            dropped and counted.",
        // Stack ids are 32-bit, two values kept back.
        apply: |v| {
            let n = values::count_in(v, 1, u64::from(u32::MAX) - 1)?;
            settings::set_max_stacks(n as usize);
            Ok(())
        },
    },
    Setting {
        key: "dump_prefix",
        default: "`jeprof`",
        doc: "Path prefix of sequenced dumps, which are named as jemalloc names them: \
            `<prefix>.<pid>.<seq>.i<n>.heap` (interval), `.u<n>.heap` (peak), `.l<n>.heap` \
            (near the memory limit), `.m<n>.heap` (manual, `dump_next()`), `.f.heap` (final); `seq` counts every sequenced dump of the \
            process from 0, `<n>` those of the kind. A prefix ending in `%p` already ends with \
            the pid, which is not added again (`app.%p` gives `app.<pid>.<seq>.i<n>.heap`). The \
            directory must exist and be writable when the setting is read; empty: the default.",
        apply: |v| values::dump_path(v).map(|p| *lock(&settings::DUMP_PREFIX) = p),
    },
    Setting {
        key: "dump_interval",
        default: "`0` (none)",
        doc: "A dump each time this many bytes (a size: `1G`) have been allocated, process-wide, \
            counted as the sum of the samples' estimates (so the count costs nothing between \
            samples). Written by a background thread; crossings while it writes are merged into \
            one dump.",
        apply: |v| values::size(v).map(settings::set_dump_interval),
    },
    Setting {
        key: "dump_peak",
        default: "`0` (none)",
        doc: "A factor above 1: a dump of the peak heap (`peak_snapshot()`) whenever the \
            estimated live bytes exceed the last dumped peak by this factor (the first at the \
            first sample). Background thread, as above. Fires at the peak tracker's snapshots, so \
            a factor below `peak_growth` behaves as `peak_growth`.",
        apply: |v| values::factor(v, true).map(settings::set_dump_peak),
    },
    Setting {
        key: "peak_growth",
        default: "`1.1`",
        doc: "The peak tracker's growth factor (above 1): it re-snapshots when the estimated live \
            bytes exceed its last snapshot's by this factor (tcmalloc's rule).",
        apply: |v| values::factor(v, false).map(settings::set_peak_growth),
    },
    Setting {
        key: "dump_near_limit",
        default: "`0` (none)",
        doc: "A fraction F of the memory limit (0 < F < 1, `0.8`): a dump of kind `l` \
            (`<prefix>.<pid>.<seq>.l<n>.heap`) when the use of the cgroup that holds the tightest \
            hard limit (v1 `memory.limit_in_bytes`, v2 `memory.max`) reaches F of it, once per \
            crossing, and at a v2 `high` or `max` event; re-armed when the use falls below F − \
            0.05 of the limit ([Near the memory limit](#near-the-memory-limit)). Written \
            unsymbolized and fsynced by a watcher thread of its own; with no limit, \
            `stats().near_limit` says so and nothing is watched.",
        apply: |v| values::fraction(v).map(settings::set_dump_near_limit),
    },
    Setting {
        key: "max_dumps",
        default: "`0` (all)",
        doc: "Keep at most this many sequenced dumps: beyond it the oldest this process wrote is \
            removed (never another process's file, not even its parent's), except the newest \
            near-limit dump, which is kept.",
        apply: |v| values::count_in(v, 0, u64::MAX).map(settings::set_max_dumps),
    },
    Setting {
        key: "dump_final",
        default: "`false`",
        doc: "Write a final sequenced dump (`.f.heap`) from the `atexit` handler, as jemalloc's \
            `prof_final` does; only in the process that read the setting.",
        apply: |v| values::boolean(v).map(settings::set_dump_final),
    },
    Setting {
        key: "leak_interval",
        default: "`60`",
        doc: "Seconds (fractions allowed, 0.001 to 86400) between the leak history's snapshots of \
            the per-stack live sums, which `leak_suspects()` and `/debug/pprof/leaks` test ([Leak \
            suspects](#leak-suspects-in-the-running-process)); `0`: no history. Recorded by a \
            thread of its own, started when first needed: before `main` when this setting is \
            given, else with the HTTP listener or at the first `leak_suspects()` call.",
        apply: |v| values::interval(v).map(settings::set_leak_interval),
    },
    Setting {
        key: "leak_history",
        default: "`64`",
        doc: "Snapshots the leak history keeps (3 to 4096; the oldest is dropped): the default \
            keeps an hour. At most `leak_history × (2048 × 20 + 48)` bytes, 2.6 MB at the \
            default.",
        apply: |v| {
            let n = values::count_in(v, 3, settings::MAX_LEAK_HISTORY as u64)?;
            settings::set_leak_history(n as usize);
            Ok(())
        },
    },
    Setting {
        key: "service",
        default: "none",
        doc: "A name for this service, put as the `service` label on every pprof profile (also \
            `set_service(name)`). At most 256 printable characters; empty: none.",
        apply: |v| values::service_name(v).map(|n| *lock(&settings::SERVICE) = n),
    },
    Setting {
        key: "http",
        default: "none",
        doc: "With the `http` feature: serve the endpoints on this `host:port`, an IP address or \
            a host name resolved when the listener starts (`127.0.0.1:6060`, `localhost:6060`), \
            from a listener started before `main` (or by `configure`). A listener that cannot \
            start (the port in use) is said on stderr and in `stats().http_listener`; the program \
            runs on. Refused, with a reason, in a build without the feature; empty: none.",
        apply: |v| values::http_address(v).map(|a| *lock(&settings::HTTP_ADDR) = a),
    },
    Setting {
        key: "otlp_push",
        default: "none",
        doc: "With the `otlp` feature: send the profile as OpenTelemetry profiles to this \
            OTLP/HTTP base URL (`http://host:port[/prefix]`; the path `/v1development/profiles` \
            is added) every `otlp_interval`, from a thread started before `main` (or by \
            `configure`) ([OTLP push](#otlp-push)). Plain HTTP only; refused, with a reason, for \
            `https` and in a build without the feature; empty: none (a running pusher stops).",
        apply: |v| values::otlp_url(v).map(|u| *lock(&settings::OTLP_PUSH) = u),
    },
    Setting {
        key: "otlp_interval",
        default: "`60`",
        doc: "Seconds (fractions allowed, 0.1 to 86400) between the profiles `otlp_push` sends.",
        apply: |v| match values::interval(v)? {
            s if s >= values::MIN_OTLP_INTERVAL => {
                settings::set_otlp_interval(s);
                Ok(())
            }
            _ => Err(format!(
                "must be from {} to 86400 seconds",
                values::MIN_OTLP_INTERVAL
            )),
        },
    },
    Setting {
        key: "otlp_compression",
        default: "`none`",
        doc: "`gzip`: `otlp_push` sends each request gzipped (`Content-Encoding: gzip`, which \
            Grafana Pyroscope and the OpenTelemetry Collector read): fewer bytes on the wire for \
            the CPU of compressing them on the pusher's thread; `none`: as it is.",
        apply: |v| values::otlp_gzip(v).map(settings::set_otlp_gzip),
    },
    Setting {
        key: "program",
        default: "all",
        doc: "Profile only the programs named, separated by `|` \
            (`program:redis-server|redis-cli`): a process whose `argv[0]` and executable \
            (`/proc/self/exe`) both have other names passes through, with no sampling, no threads \
            and no dumps, so wrappers and children started with the same environment leave \
            nothing behind. Empty: all.",
        apply: |v| {
            let names = values::program_names(v)?;
            let (started_as, executable) = values::this_program();
            let other = !names.is_empty() && !values::is_named(&names, &started_as, &executable);
            // Ordering: read by `apply` on the same thread, and by `passing_through` on its own.
            PASSING_THROUGH.store(other, Ordering::Relaxed);
            Ok(())
        },
    },
];

/// Set when the `program` setting names other programs than this one.
static PASSING_THROUGH: AtomicBool = AtomicBool::new(false);

/// What a process that `program` does not name applies after its settings: every setting that
/// would sample, start a thread or write a dump, off.
const PASS_THROUGH: &str =
    "active:false,dump_interval:0,dump_peak:0,dump_near_limit:0,dump_final:false,\
    dump_on_exit:,leak_interval:0,http:,otlp_push:";

/// Whether this process passes through (`program` names other programs).
pub(crate) fn passing_through() -> bool {
    // Ordering: see the `program` setting.
    PASSING_THROUGH.load(Ordering::Relaxed)
}

/// Applies a `key:value,key:value` string (the `JEPROF_SHIM` syntax, jemalloc's `MALLOC_CONF`):
/// every valid pair through its table entry; the error lists the others. A process that
/// `program` does not name then turns off what [`PASS_THROUGH`] lists, whatever the string's
/// order.
pub(crate) fn apply(spec: &str) -> Result<(), ConfigError> {
    let mut problems = Vec::new();
    apply_pairs(spec, &mut problems);
    if passing_through() {
        apply_pairs(PASS_THROUGH, &mut problems);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError { problems })
    }
}

fn apply_pairs(spec: &str, problems: &mut Vec<String>) {
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once(':') else {
            problems.push(format!("`{pair}`: expected key:value"));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if let Err(why) = apply_one(key, value) {
            problems.push(format!("`{pair}`: {why}"));
        }
    }
}

/// The known keys, in the table's order, for the unknown-key error.
fn known_keys() -> String {
    let keys: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
    keys.join(", ")
}

/// The one reader of `JEPROF_SHIM`: applies it through the table, once per process, from the
/// profiler's initialisation (before `main`, or at an earlier first allocation). Bad pairs are
/// reported on stderr and leave their keys at the defaults.
pub(crate) fn read_environment() {
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

/// The manual's settings table, made from [`SETTINGS`] (a `|` in a cell is escaped); a test
/// writes it into `README.md` (`JEPROF_SHIM_BLESS=1`) and holds the README to it.
#[cfg(test)]
pub(crate) fn markdown() -> String {
    let mut out = String::from("| key | default | meaning |\n|---|---|---|\n");
    for s in SETTINGS {
        let cell = |t: &str| t.replace('|', "\\|");
        out += &format!("| `{}` | {} | {} |\n", s.key, cell(s.default), cell(s.doc));
    }
    out
}

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

/// One setting through its table entry (`set_service` is `service`'s).
pub(crate) fn apply_one(key: &str, value: &str) -> Result<(), String> {
    match SETTINGS.iter().find(|s| s.key == key) {
        Some(setting) => (setting.apply)(value),
        None => Err(format!("unknown key (known: {})", known_keys())),
    }
}

/// `arena_size`, refused once the arena exists and outside what it can reserve.
fn set_arena_size(bytes: u64) -> Result<(), String> {
    if bytes < (4 << 20) {
        Err("must be at least 4 MiB (jemalloc needs room for arena metadata)".into())
    } else if bytes > sampled_arena::MAX_RANGE as u64 {
        Err(
            "must be at most 32 TiB (it is rounded up to a power of two and reserved twice \
             over for alignment, inside a 47-bit address space)"
                .into(),
        )
    } else if sampled_arena::reserved() {
        Err("the sampled arena already exists; set it before the first sample".into())
    } else {
        settings::set_arena_size(bytes as usize);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

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
    fn an_unknown_key_is_answered_with_every_key_of_the_table_in_order() {
        let err = apply("sample_rat:1").unwrap_err();
        let keys: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
        let expected = format!("unknown key (known: {})", keys.join(", "));
        assert!(err.problems[0].ends_with(&expected), "{err}");
        assert!(keys.len() >= 22 && keys.contains(&"program"));
    }

    #[test]
    fn sizes_with_units_are_taken_wherever_a_size_is() {
        apply("sample_rate:512k").unwrap();
        assert_eq!(settings::sample_rate(), settings::DEFAULT_SAMPLE_RATE);
        apply("dump_interval:1G").unwrap();
        assert_eq!(settings::dump_interval(), 1 << 30);
        apply("dump_interval:0").unwrap();
        let err = apply("arena_size:1M").unwrap_err();
        assert!(err.problems[0].contains("at least 4 MiB"), "{err}");
        let err = apply("sample_rate:1MB").unwrap_err();
        assert!(err.problems[0].contains("powers of 1024"), "{err}");
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
            "dump_on_exit:/tmp",
            "sample_rate:-1",
            "active:yes",
            "dump_prefix:/no/such/directory/app",
            "dump_interval:1e9",
            "dump_peak:1",
            "dump_peak:nan",
            "peak_growth:0",
            "peak_growth:1.0",
            "dump_near_limit:1",
            "dump_near_limit:-0.2",
            "dump_near_limit:nan",
            "max_dumps:-3",
            "dump_final:maybe",
            "leak_interval:-1",
            "leak_interval:nan",
            "leak_interval:100000",
            "leak_history:2",
            "leak_history:5000",
            "program:/usr/bin/redis-server",
        ] {
            let err = apply(bad).unwrap_err();
            assert_eq!(err.problems.len(), 1, "{bad}: {err}");
        }
        assert_eq!(settings::arena_size(), before);
        assert!(lock(&settings::DUMP_ON_EXIT).is_none());
        assert!(lock(&settings::DUMP_PREFIX).is_none());
        assert_eq!(settings::dump_peak(), 0.0);
        assert_eq!(settings::dump_near_limit(), 0.0);
        assert_eq!(settings::peak_growth(), settings::DEFAULT_PEAK_GROWTH);
        assert_eq!(settings::leak_interval(), settings::DEFAULT_LEAK_INTERVAL);
        assert_eq!(settings::leak_history(), settings::DEFAULT_LEAK_HISTORY);
        assert!(!passing_through());
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

    /// The table in `README.md`'s Settings section: the lines from its header row to the first
    /// line that is not a table row.
    fn readme_table(readme: &str) -> Option<(usize, usize)> {
        let header = "| key | default | meaning |\n";
        let start = readme.find(header)?;
        let mut end = start;
        for line in readme[start..].split_inclusive('\n') {
            if !line.starts_with('|') {
                break;
            }
            end += line.len();
        }
        Some((start, end))
    }

    /// `JEPROF_SHIM_BLESS=1` rewrites the README's table from the code's.
    #[test]
    fn the_manuals_settings_table_is_the_code_table() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let (start, end) = readme_table(&readme).expect("README.md has no settings table");
        let expected = markdown();
        if readme[start..end] == expected {
            return;
        }
        if std::env::var_os("JEPROF_SHIM_BLESS").is_some_and(|v| v == "1") {
            let blessed = format!("{}{expected}{}", &readme[..start], &readme[end..]);
            std::fs::write(&path, blessed).unwrap();
            return;
        }
        panic!(
            "README.md's settings table differs from profiler/settings_table.rs's; run with \
             JEPROF_SHIM_BLESS=1 to rewrite it, or paste:\n{expected}"
        );
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Where a file reads `JEPROF_SHIM` or writes a setting: the line numbers of the offending
    /// lines. Comments are skipped; `base/settings.rs` defines the setters and this module is the
    /// table.
    fn settings_touched_outside_the_table(text: &str) -> Vec<usize> {
        let writes = [
            "\"JEPROF_SHIM\"",
            "settings::set_",
            "settings::DUMP_ON_EXIT) =",
            "settings::DUMP_PREFIX) =",
            "settings::SERVICE) =",
            "settings::HTTP_ADDR) =",
            "settings::OTLP_PUSH) =",
        ];
        let code = |l: &&str| !l.trim_start().starts_with("//");
        (text.lines().enumerate())
            .filter(|(_, l)| code(l) && writes.iter().any(|w| l.contains(w)))
            .map(|(n, _)| n + 1)
            .collect()
    }

    #[test]
    fn no_setting_is_read_or_written_outside_the_table() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        rust_files(&root.join("../preload/src"), &mut files);
        let allowed = [
            root.join("src/profiler/settings_table.rs"),
            root.join("src/profiler/setting_values.rs"),
            root.join("src/base/settings.rs"),
        ];
        let mut found = Vec::new();
        for file in files.iter().filter(|f| !allowed.contains(f)) {
            let text = std::fs::read_to_string(file).unwrap();
            for line in settings_touched_outside_the_table(&text) {
                found.push(format!("{}:{line}", file.display()));
            }
        }
        assert!(
            files.len() > 50,
            "{} files: the scan looked in the wrong place",
            files.len()
        );
        assert!(
            found.is_empty(),
            "settings read or written outside profiler/settings_table.rs (go through its table):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_scan_finds_a_getenv_and_a_setter_but_not_a_comment() {
        let text = "// getenv(c\"JEPROF_SHIM\")\nlet r = getenv(c\"JEPROF_SHIM\".as_ptr());\n\
                    settings::set_sample_rate(1);\nlet x = settings::sample_rate();\n";
        assert_eq!(settings_touched_outside_the_table(text), vec![2, 3]);
    }
}
