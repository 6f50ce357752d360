//! The shim's profiles in pprof form, described as pprof readers expect: the period, when the
//! profile was taken and how long it covers, the default sample type, the profiler's notes as
//! comments, and labels naming the process (program, build id, host name, service) on every
//! sample, so a scraper that stores many processes' profiles can select by them.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use jeprof_dumpfmt::pprof::PbProfile;
use jeprof_dumpfmt::Profile;

use crate::base::settings;
use crate::base::sync::lock;
use crate::base::thread::Guard;
use crate::parts::build_ids;

pub(crate) use crate::api::pprof::PprofOptions;

/// The labels that name this process: `program` (the file name it was started by, [`started_as`],
/// else the executable's), `build_id` (its GNU build id), `hostname`, `pid` and `service` (when
/// set), each present only when known.
pub(crate) fn process_labels() -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let program = started_as().or_else(|| std::fs::read_link("/proc/self/exe").ok());
    if let Some(name) = program.as_deref().and_then(Path::file_name) {
        labels.push(("program".to_string(), name.to_string_lossy().into_owned()));
    }
    if let Some(id) = build_ids::program() {
        labels.push(("build_id".to_string(), id));
    }
    if let Some(host) = hostname() {
        labels.push(("hostname".to_string(), host));
    }
    labels.push(("pid".to_string(), std::process::id().to_string()));
    if let Some(service) = lock(&settings::SERVICE).clone() {
        labels.push(("service".to_string(), service));
    }
    labels
}

/// The labels every dump carries ([`jeprof_dumpfmt::Profile::labels`]): [`process_labels`] and
/// `time`, the dump's moment (RFC 3339, UTC, to the microsecond). A line break in a value (a host or
/// service name can hold anything) becomes a space, as a label value cannot hold one.
pub(crate) fn dump_labels(time: SystemTime) -> Vec<(String, String)> {
    let mut labels = process_labels();
    labels.push((
        "time".to_string(),
        jeprof_dumpfmt::labels::rfc3339_utc(time),
    ));
    for (_, value) in &mut labels {
        if jeprof_dumpfmt::labels::value_problem(value).is_some() {
            *value = value.replace(['\n', '\r'], " ");
        }
    }
    labels
}

/// The path the program was started by: `argv[0]` (the C library's `program_invocation_name`,
/// else the first word of `/proc/self/cmdline`), resolved against `PATH` when it is a bare name,
/// when it names the running executable. `/proc/self/exe` has links resolved (Debian's
/// `/usr/bin/redis-server` is a link to `redis-check-rdb`), and users know a program by the name
/// they start it with. `program_invocation_name` comes first because programs that rewrite their
/// `argv` for `ps` (redis's `setproctitle`) keep a copy of it there. `None` when neither names
/// the executable: a program that rewrote both (postgres's process titles), a name not on `PATH`,
/// a working directory changed since a relative start.
fn started_as() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let from_cmdline = cmdline.split(|&b| b == 0).next().map(<[u8]>::to_vec);
    [invocation_name(), from_cmdline]
        .into_iter()
        .flatten()
        .filter(|argv0| !argv0.is_empty())
        .find_map(|argv0| {
            let argv0 = Path::new(std::ffi::OsStr::from_bytes(&argv0));
            let candidate = if argv0.as_os_str().as_bytes().contains(&b'/') {
                std::env::current_dir().ok()?.join(argv0)
            } else {
                let path = std::env::var_os("PATH")?;
                std::env::split_paths(&path)
                    .map(|dir| dir.join(argv0))
                    .find(|p| p.is_file())?
            };
            (std::fs::canonicalize(&candidate).ok()? == exe).then_some(candidate)
        })
}

/// The C library's `program_invocation_name` (glibc's and musl's: `argv[0]` as the program was
/// started, or what the program set it to).
#[cfg(any(target_env = "gnu", target_env = "musl"))]
fn invocation_name() -> Option<Vec<u8>> {
    extern "C" {
        static program_invocation_name: *const std::ffi::c_char;
    }
    // SAFETY: the C library sets the pointer before any code of the program runs, to argv[0] or
    // NULL; a program that changes it points it at another NUL-terminated string that it keeps
    // (setproctitle implementations strdup argv[0] for it). Read here, never written.
    let name = unsafe { program_invocation_name };
    if name.is_null() {
        return None;
    }
    // SAFETY: not NULL, so a NUL-terminated string alive for the process (above).
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    Some(name.to_bytes().to_vec())
}

#[cfg(not(any(target_env = "gnu", target_env = "musl")))]
fn invocation_name() -> Option<Vec<u8>> {
    None
}

/// The host's name (`gethostname`), if it has one.
fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    // POSIX leaves the string unterminated when truncated; the last byte stays 0 either way.
    let len = buf[..buf.len() - 1].iter().position(|&b| b == 0)?;
    (len > 0).then(|| String::from_utf8_lossy(&buf[..len]).into_owned())
}

/// `profile` as pprof, described by `options`, [`process_labels`] and the loaded objects' build
/// ids ([`PprofOptions::encode`]).
pub(crate) fn encode(profile: &Profile, options: &PprofOptions) -> PbProfile {
    let _guard = Guard::enter();
    let program_file = started_as().map(|p| p.display().to_string());
    options.encode(profile, process_labels(), build_ids::loaded(), program_file)
}

/// `profile`'s live stacks with their residency `rss` as pprof ([`PprofOptions::encode_rss`]),
/// described as [`encode`] describes a heap profile.
#[cfg(feature = "http")]
pub(crate) fn encode_rss(
    profile: &Profile,
    rss: &jeprof_dumpfmt::rss::RssFigures,
    options: &PprofOptions,
) -> PbProfile {
    let _guard = Guard::enter();
    let program_file = started_as().map(|p| p.display().to_string());
    options.encode_rss(
        profile,
        rss,
        process_labels(),
        build_ids::loaded(),
        program_file,
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::pprof::SampleType;

    #[test]
    fn dump_labels_are_the_process_labels_then_the_moment_and_all_writable() {
        let moment = std::time::UNIX_EPOCH + Duration::from_secs(1_795_509_000);
        let labels = dump_labels(moment);
        let (time, process) = labels.split_last().expect("labels");
        assert_eq!(process, process_labels().as_slice());
        assert_eq!(
            time,
            &(
                "time".to_string(),
                "2026-11-24T08:30:00.000000Z".to_string()
            )
        );
        let mut profile = Profile::new(1);
        profile.labels = labels;
        profile.validate().expect("writable labels");
    }

    #[test]
    fn the_program_is_named_by_the_path_it_was_started_by_when_that_is_the_executable() {
        // cargo starts the test binary by its path: that path, which is the executable.
        let started = started_as().expect("argv[0] names the test binary");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(std::fs::canonicalize(&started).unwrap(), exe);
        let program = process_labels().into_iter().find(|(k, _)| k == "program");
        let name = started.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(program, Some(("program".to_string(), name)));
    }

    #[test]
    fn hostname_is_what_the_kernel_reports() {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(hostname().as_deref(), Some(kernel.trim()));
    }

    #[test]
    fn header_carries_period_time_duration_default_type_and_labels() {
        let mut profile = Profile::new(4096);
        profile.annotations = vec![("shim_live_samples".into(), "0".into())];
        let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        crate::profiler::settings_table::apply_one("service", "checkout").unwrap();
        let pb = encode(
            &profile,
            &PprofOptions {
                default_sample_type: SampleType::AllocSpace,
                time: Some(started),
                duration: Duration::from_millis(2500),
                comments: vec!["window".into()],
            },
        );
        crate::profiler::settings_table::apply_one("service", "").unwrap();
        let s = |i: i64| pb.string_table[i as usize].as_str();
        assert_eq!(pb.period, 4096);
        assert_eq!(s(pb.period_type.as_ref().unwrap().r#type), "space");
        assert_eq!(pb.time_nanos, 1_700_000_000_000_000_000);
        assert_eq!(pb.duration_nanos, 2_500_000_000);
        assert_eq!(s(pb.default_sample_type), "alloc_space");
        let comments: Vec<&str> = pb.comment.iter().map(|&i| s(i)).collect();
        assert!(comments.contains(&"shim_live_samples: 0"), "{comments:?}");
        assert!(comments.contains(&"window"), "{comments:?}");
        assert!(comments.contains(&"service=checkout"), "{comments:?}");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let program = format!("program={}", exe.file_name().unwrap().to_string_lossy());
        assert!(comments.contains(&program.as_str()), "{comments:?}");
        assert!(
            comments.iter().any(|c| c.starts_with("build_id=")),
            "{comments:?}"
        );
        assert!(
            comments.iter().any(|c| c.starts_with("hostname=")),
            "{comments:?}"
        );
    }
}
