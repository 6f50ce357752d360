//! The values of settings as people type them: sizes with units, paths checked when read, host
//! names, program names, `%p`. Pure parsers: each takes the text after `key:` and returns the
//! value or why not; [`super::settings_table`] stores what they return.

use std::path::Path;

/// A size in bytes: a whole number, optionally followed by a unit. `k`, `M`, `G` and `T` (either
/// case) and `KiB`, `MiB`, `GiB` and `TiB` are powers of 1024 (2^10, 2^20, 2^30, 2^40), as in
/// jemalloc's `lg_` settings, `-Xmx512m` and `ulimit`: the sizes set here (a sampling period, an
/// arena) are powers of two in the profiler, and `512k` is jemalloc's default period of 2^19.
/// `kB`, `MB` and decimal fractions are refused: they might be meant as powers of 1000.
pub(crate) fn size(value: &str) -> Result<u64, String> {
    let refused = || {
        format!(
            "`{value}` is not a size (bytes, or a whole number with k, M, G, KiB, MiB or GiB, \
             which are powers of 1024: 512k, 1G)"
        )
    };
    let digits = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(digits);
    let shift = match unit.trim() {
        "" => 0,
        "k" | "K" | "KiB" => 10,
        "m" | "M" | "MiB" => 20,
        "g" | "G" | "GiB" => 30,
        "t" | "T" | "TiB" => 40,
        _ => return Err(refused()),
    };
    let number: u64 = number.parse().map_err(|_| refused())?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{value}` is more than 2^64 bytes"))
}

/// `dump_on_exit`'s path (and `dump_prefix`'s): empty for none; otherwise it must name a file, not
/// a directory, in a directory that exists and can be written now, so that a typo is reported
/// when the setting is read and not, silently, at exit.
pub(crate) fn dump_path(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let expanded = with_pid(value);
    let path = Path::new(&expanded);
    if path.file_name().is_none() || expanded.ends_with('/') {
        return Err(format!("`{value}` names no file"));
    }
    if path.is_dir() {
        return Err(format!(
            "`{expanded}` is a directory: name a file in it (e.g. {}/heap.prof)",
            expanded.trim_end_matches('/')
        ));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!("the directory `{}` does not exist", dir.display()));
    }
    if !writable(dir) {
        return Err(format!(
            "the directory `{}` cannot be written by this process",
            dir.display()
        ));
    }
    Ok(Some(value.to_string()))
}

/// Whether this process may create files in `dir` (`access(2)` with `W_OK`).
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `name` is a NUL-terminated string that outlives the call; access only reads it.
    unsafe { libc::access(name.as_ptr(), libc::W_OK) == 0 }
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

/// The start of a sequenced dump's name, `<prefix>.<pid>`, jemalloc's shape. A prefix that ends in
/// `%p` (the preload README's `app.%p`) already ends with the pid: it is not added twice, so
/// `redis.%p` gives `redis.1564.0.u0.heap`, not `redis.1564.1564.0.u0.heap`.
pub(crate) fn sequenced_stem(prefix: &str) -> String {
    if prefix.ends_with("%p") {
        with_pid(prefix)
    } else {
        format!("{}.{}", with_pid(prefix), std::process::id())
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

/// `http`'s listening address, `host:port` (empty for none): an IP address (`127.0.0.1:6060`,
/// `[::1]:6060`) or a host name (`localhost:6060`), which is resolved when the listener starts.
/// Refused without the crate's `http` feature, so a setting that would silently serve nothing is
/// reported.
pub(crate) fn http_address(value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    if !cfg!(feature = "http") {
        return Err("this build of jeprof-shim has no `http` feature".to_string());
    }
    if value.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(Some(value.to_string()));
    }
    let Some((host, port)) = value.rsplit_once(':') else {
        return Err(format!(
            "`{value}` names no port (e.g. 127.0.0.1:6060 or localhost:6060)"
        ));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!("`{port}` in `{value}` is not a port (0 to 65535)"));
    }
    let label = |l: &str| {
        !l.is_empty() && l.len() <= 63 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if host.len() > 253 || !host.split('.').all(label) {
        return Err(format!(
            "`{host}` in `{value}` is neither an IP address nor a host name (e.g. \
             127.0.0.1:6060 or localhost:6060)"
        ));
    }
    Ok(Some(value.to_string()))
}

/// The shortest `otlp_interval`: each push takes a snapshot of the whole profile (and symbolizes
/// it when `symbolize` is on), which more than ten times a second would cost the process more than
/// any backend's resolution is worth.
pub(crate) const MIN_OTLP_INTERVAL: f64 = 0.1;

/// `otlp_push`'s base URL (empty for none): `http://host[:port][/prefix]`, to which the pusher
/// adds `/v1development/profiles`. Refused without the crate's `otlp` feature, and for `https`
/// (the client is built without TLS: push to a Collector on the host or in the pod).
pub(crate) fn otlp_url(value: &str) -> Result<Option<String>, String> {
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

/// `otlp_compression`: `gzip` (true) or `none` (false).
pub(crate) fn otlp_gzip(value: &str) -> Result<bool, String> {
    match value {
        "gzip" => Ok(true),
        "none" | "" => Ok(false),
        other => Err(format!("`{other}` is not `gzip` or `none`")),
    }
}

/// `program`'s names, separated by `|` (a `,` would end the pair): basenames, as `ps` shows them.
pub(crate) fn program_names(value: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = value.split('|').map(|n| n.trim().to_string()).collect();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(bad) = names.iter().find(|n| n.is_empty() || n.contains('/')) {
        return Err(format!(
            "`{bad}` is not a program's name (names without a directory, separated by `|`: \
             program:redis-server|redis-cli)"
        ));
    }
    Ok(names)
}

/// Whether a program is one of `names`: the basename of the name it was started as (`argv[0]`)
/// or of its executable (`/proc/self/exe`, links resolved) is among them. Either suffices: a
/// program started through a link (`python3` → `python3.11`) is named by the link, and a program
/// started under another `argv[0]` by its file.
pub(crate) fn is_named(names: &[String], started_as: &str, executable: &str) -> bool {
    let base = |p: &str| p.rsplit('/').next().unwrap_or("").to_string();
    let (started_as, executable) = (base(started_as), base(executable));
    names
        .iter()
        .any(|n| (!started_as.is_empty() && *n == started_as) || *n == executable)
}

/// This process's `argv[0]` (from `/proc/self/cmdline`, which `exec` set) and executable.
pub(crate) fn this_program() -> (String, String) {
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or(&[]);
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    (
        String::from_utf8_lossy(argv0).into_owned(),
        exe.to_string_lossy().into_owned(),
    )
}

/// A count in `lo..=hi`.
pub(crate) fn count_in(value: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let n = value
        .parse::<u64>()
        .map_err(|_| format!("`{value}` is not a non-negative integer"))?;
    if (lo..=hi).contains(&n) {
        Ok(n)
    } else {
        Err(format!("must be between {lo} and {hi}"))
    }
}

/// A growth factor: finite, above 1 and at most 1000; 0 too (off) when `zero_is_off`.
pub(crate) fn factor(value: &str, zero_is_off: bool) -> Result<f64, String> {
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

/// A fraction of a limit: 0 (off), or strictly between 0 and 1.
pub(crate) fn fraction(value: &str) -> Result<f64, String> {
    let fraction = value
        .parse::<f64>()
        .map_err(|_| format!("`{value}` is not a number"))?;
    if fraction == 0.0 || (fraction > 0.0 && fraction < 1.0) {
        Ok(fraction)
    } else {
        Err("must be 0 (off) or a fraction above 0 and below 1 (0.8)".to_string())
    }
}

/// Seconds: 0 (off), or from a millisecond to a day; fractions allowed.
pub(crate) fn interval(value: &str) -> Result<f64, String> {
    let seconds = value
        .parse::<f64>()
        .map_err(|_| format!("`{value}` is not a number of seconds"))?;
    if seconds == 0.0 || (0.001..=86_400.0).contains(&seconds) {
        Ok(seconds)
    } else {
        Err("must be 0 (off) or from 0.001 to 86400 seconds".to_string())
    }
}

pub(crate) fn boolean(value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("`{value}` is not true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units_as_jemalloc_users_type_them() {
        assert_eq!(size("524288"), Ok(524_288));
        assert_eq!(size("512k"), Ok(1 << 19));
        assert_eq!(size("512K"), Ok(1 << 19));
        assert_eq!(size("512KiB"), Ok(1 << 19));
        assert_eq!(size("64M"), Ok(64 << 20));
        assert_eq!(size("1G"), Ok(1 << 30));
        assert_eq!(size("1GiB"), Ok(1 << 30));
        assert_eq!(size("32TiB"), Ok(32 << 40));
        for bad in [
            "1e9",
            "-1",
            "1.5G",
            "1MB",
            "1kB",
            "G",
            "",
            "1 Gb",
            "99999999999T",
        ] {
            assert!(size(bad).is_err(), "{bad}");
        }
        assert!(size("1MB").unwrap_err().contains("powers of 1024"));
    }

    #[test]
    fn a_directory_where_a_dump_file_is_meant_is_refused_when_read() {
        let dir = std::env::temp_dir();
        let err = dump_path(dir.to_str().unwrap()).unwrap_err();
        assert!(err.contains("is a directory: name a file in it"), "{err}");
        let file = dir.join("heap.prof");
        assert!(dump_path(file.to_str().unwrap()).unwrap().is_some());
        assert!(dump_path("/no/such/directory/heap.prof").is_err());
        assert_eq!(dump_path(""), Ok(None));
    }

    #[test]
    fn a_prefix_ending_in_pct_p_names_the_pid_once() {
        let pid = std::process::id();
        assert_eq!(
            sequenced_stem("/tmp/prof/redis.%p"),
            format!("/tmp/prof/redis.{pid}")
        );
        assert_eq!(
            sequenced_stem("/tmp/prof/redis"),
            format!("/tmp/prof/redis.{pid}")
        );
        assert_eq!(sequenced_stem("%p/app"), format!("{pid}/app.{pid}"));
    }

    #[test]
    fn http_takes_host_names_and_ip_addresses_with_a_port() {
        if !cfg!(feature = "http") {
            assert!(http_address("localhost:6062").is_err());
            return;
        }
        for good in [
            "127.0.0.1:6060",
            "[::1]:6060",
            "localhost:6062",
            "prof-1.example:80",
        ] {
            assert_eq!(http_address(good), Ok(Some(good.to_string())), "{good}");
        }
        assert!(http_address("localhost")
            .unwrap_err()
            .contains("names no port"));
        assert!(http_address("localhost:http")
            .unwrap_err()
            .contains("not a port"));
        assert!(http_address("bad_host:1").unwrap_err().contains("neither"));
    }

    #[test]
    fn a_program_is_named_by_the_basename_it_was_started_as_or_its_executable() {
        let names = program_names("redis-server|python3").unwrap();
        assert!(is_named(
            &names,
            "/usr/bin/redis-server",
            "/usr/bin/redis-server"
        ));
        assert!(is_named(&names, "python3", "/usr/bin/python3.11"));
        assert!(!is_named(&names, "bash", "/usr/bin/bash"));
        assert!(!is_named(&names, "readlink", "/usr/bin/readlink"));
        assert!(program_names("/usr/bin/redis-server").is_err());
        assert!(program_names("a||b").is_err());
        assert_eq!(program_names(""), Ok(Vec::new()));
    }
}
