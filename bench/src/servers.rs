//! Real, unmodified servers from Debian under their own load generators on loopback: what each
//! allocator variant costs them ([`run_table`]), what our profile of them says, and how our
//! estimates compare with heaptrack's exact live bytes ([`compare_with_heaptrack`]).
//!
//! Every server is a child process started by the harness on free loopback ports, with its own
//! configuration and data in a temporary directory, stopped with `SIGTERM` (so at-exit dumps are
//! written) and killed if it does not stop in time. Every load generator runs under coreutils'
//! `timeout`, so no run outlives its bound. The variant (which malloc, which profiler) is set in the
//! server's environment only: the load generators always run with the system's malloc.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::stats::{self, Xorshift};

/// Variables that choose or configure a malloc or a profiler: cleared from every child first, so
/// the caller's settings never leak into a variant (or into a load generator).
const ALLOCATOR_VARIABLES: [&str; 4] = [
    "LD_PRELOAD",
    "MALLOC_CONF",
    "JEPROF_SHIM",
    "_RJEM_MALLOC_CONF",
];

/// How long a server may take to exit after `SIGTERM` (heaptrack's runs write their trace then).
const STOP_LIMIT: Duration = Duration::from_secs(60);

/// One way of running a server: which malloc it gets and which profiler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Variant {
    /// Debian's `libjemalloc2` preloaded, no profiler: the baseline of every ratio.
    Jemalloc,
    /// The same again: how far two identical variants land apart (the noise floor).
    Again,
    /// jemalloc's own profiler at a mean of 512 KiB (`prof:true,lg_prof_sample:19`).
    JemallocProf,
    /// `libjeprof_preload.so` at R = [`Settings::rate`].
    Ours,
    /// glibc's malloc (nothing preloaded), as context; not for a server linked against jemalloc.
    Glibc,
}

impl Variant {
    /// Every variant, in the order the tables list them.
    pub const ALL: [Variant; 5] = [
        Variant::Jemalloc,
        Variant::Again,
        Variant::JemallocProf,
        Variant::Ours,
        Variant::Glibc,
    ];

    /// The key `--variants` takes.
    pub fn key(self) -> &'static str {
        match self {
            Variant::Jemalloc => "jemalloc",
            Variant::Again => "again",
            Variant::JemallocProf => "jemalloc-prof",
            Variant::Ours => "ours",
            Variant::Glibc => "glibc",
        }
    }

    /// The variant for a key.
    pub fn parse(key: &str) -> Result<Variant, String> {
        Variant::ALL
            .into_iter()
            .find(|v| v.key() == key)
            .ok_or_else(|| {
                let known: Vec<&str> = Variant::ALL.iter().map(|v| v.key()).collect();
                format!("unknown variant `{key}` (known: {})", known.join(", "))
            })
    }
}

/// The servers the harness knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ServerKind {
    /// `redis-server`, driven by `redis-benchmark`.
    Redis,
    /// `memcached`, driven by `memcslap` (libmemcached-tools).
    Memcached,
    /// `nginx` (one process: `master_process off`), a static file and a proxied location, driven
    /// by `wrk`.
    Nginx,
}

impl ServerKind {
    /// Every server.
    pub const ALL: [ServerKind; 3] = [ServerKind::Redis, ServerKind::Memcached, ServerKind::Nginx];

    /// The key `--servers` takes.
    pub fn key(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Memcached => "memcached",
            ServerKind::Nginx => "nginx",
        }
    }

    /// The server for a key.
    pub fn parse(key: &str) -> Result<ServerKind, String> {
        ServerKind::ALL
            .into_iter()
            .find(|s| s.key() == key)
            .ok_or_else(|| format!("unknown server `{key}` (known: redis, memcached, nginx)"))
    }

    /// Debian's `redis-server` is linked against `libjemalloc.so.2`, whose `malloc` it binds before
    /// glibc's: without a preload it runs on jemalloc, so it has no glibc variant.
    pub fn links_jemalloc(self) -> bool {
        self == ServerKind::Redis
    }
}

/// Where the programs are and how big a load is.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Debian's jemalloc, built with profiling.
    pub libjemalloc: PathBuf,
    /// Our preload library.
    pub preload: PathBuf,
    /// Our mean sampling period in bytes.
    pub rate: u64,
    /// `redis-server`, `memcached`, `nginx` (a test points one elsewhere to see a failure).
    pub redis_server: PathBuf,
    /// The memcached binary.
    pub memcached: PathBuf,
    /// The nginx binary.
    pub nginx: PathBuf,
    /// Requests per redis-benchmark test (`-n`).
    pub redis_requests: u64,
    /// memcslap's `--execute-number` (per client thread, 20 threads) for each of set and get.
    pub memcached_per_thread: u64,
    /// Seconds of each wrk run (static file, then proxy).
    pub nginx_seconds: u64,
    /// How long a server may take to answer its first request after being started.
    pub startup_limit: Duration,
}

impl Settings {
    /// Debian's paths and the loads of the published table (about 5 s of load per server run).
    pub fn debian(preload: PathBuf) -> Settings {
        Settings {
            libjemalloc: PathBuf::from("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            preload,
            rate: 524_288,
            redis_server: PathBuf::from("redis-server"),
            memcached: PathBuf::from("memcached"),
            nginx: PathBuf::from("nginx"),
            redis_requests: 20_000,
            memcached_per_thread: 2_500,
            nginx_seconds: 2,
            startup_limit: Duration::from_secs(15),
        }
    }
}

/// What one load test of one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct TestResult {
    /// The load generator's name for the test (`SET`, `get`, `static`, ...).
    pub name: String,
    /// Requests completed.
    pub requests: f64,
    /// Requests per second.
    pub rps: f64,
    /// Median latency in milliseconds, where the generator reports it.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency in milliseconds, where reported.
    pub p99_ms: Option<f64>,
}

/// What one run of one server measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Each load test.
    pub tests: Vec<TestResult>,
    /// The server's CPU seconds (user + system, `/proc/PID/stat`) while the load ran.
    pub server_cpu: f64,
    /// The profile the variant wrote at exit, if it writes one.
    pub profile: Option<PathBuf>,
}

impl RunResult {
    /// Requests over the load's duration (the harmonic mean of the tests' rates, weighted by
    /// their requests).
    pub fn throughput(&self) -> f64 {
        let requests: f64 = self.tests.iter().map(|t| t.requests).sum();
        let seconds: f64 = self.tests.iter().map(|t| t.requests / t.rps).sum();
        requests / seconds
    }

    /// The mean over tests of a latency percentile, `None` when a test does not report it.
    fn mean_latency(&self, pick: impl Fn(&TestResult) -> Option<f64>) -> Option<f64> {
        let v: Option<Vec<f64>> = self.tests.iter().map(pick).collect();
        let v = v?;
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The mean over tests of their medians (ms).
    pub fn p50(&self) -> Option<f64> {
        self.mean_latency(|t| t.p50_ms)
    }

    /// The mean over tests of their 99th percentiles (ms).
    pub fn p99(&self) -> Option<f64> {
        self.mean_latency(|t| t.p99_ms)
    }

    /// The server's CPU microseconds per request.
    pub fn cpu_us_per_request(&self) -> f64 {
        let requests: f64 = self.tests.iter().map(|t| t.requests).sum();
        self.server_cpu * 1e6 / requests
    }
}

/// A free TCP port on loopback (bound, then released for the server to take).
pub fn free_port() -> Result<u16, String> {
    let l =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| format!("no free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// The CPU seconds (user + system) a process has used so far, from `/proc/PID/stat`.
pub fn process_cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    parse_stat_cpu_ticks(&stat)
        .map(|ticks| ticks as f64 / clock_ticks_per_second())
        .ok_or_else(|| format!("/proc/{pid}/stat: no utime/stime in `{}`", stat.trim()))
}

/// `utime + stime` (fields 14 and 15) of a `/proc/PID/stat` line. The command name (field 2) is in
/// parentheses and may hold spaces and parentheses itself, so the fields are counted from the last
/// `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: field 3 (state) is fields[0], so field N is fields[N - 3].
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// The kernel's clock ticks per second (`_SC_CLK_TCK`), 100 when unknown.
fn clock_ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

/// Parses `redis-benchmark --csv`: one row per test, `"test","rps","avg_latency_ms",
/// "min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`. Every
/// test ran `requests` requests (`-n`).
pub fn parse_redis_benchmark(csv: &str, requests: u64) -> Result<Vec<TestResult>, String> {
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .ok_or("redis-benchmark printed nothing")?
        .split(',')
        .map(|f| f.trim_matches('"').to_string())
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("redis-benchmark's CSV has no `{name}` column: {header:?}"))
    };
    let (test, rps, p50, p99) = (
        column("test")?,
        column("rps")?,
        column("p50_latency_ms")?,
        column("p99_latency_ms")?,
    );
    let mut out = Vec::new();
    for line in lines {
        // Test names hold no commas ("LRANGE_100 (first 100 elements)").
        let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches('"')).collect();
        let number = |i: usize| -> Result<f64, String> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("redis-benchmark: no number in column {i} of `{line}`"))
        };
        let result = TestResult {
            name: fields.get(test).unwrap_or(&"?").to_string(),
            requests: requests as f64,
            rps: number(rps)?,
            p50_ms: Some(number(p50)?),
            p99_ms: Some(number(p99)?),
        };
        if result.rps.is_nan() || result.rps <= 0.0 {
            return Err(format!("redis-benchmark: no throughput in `{line}`"));
        }
        out.push(result);
    }
    if out.is_empty() {
        return Err("redis-benchmark reported no test".to_string());
    }
    Ok(out)
}

/// Parses memcslap's `Time to set 50000 keys by 20 threads: 1.234 seconds.` (it reports no
/// latencies).
pub fn parse_memcslap(out: &str) -> Result<TestResult, String> {
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        // ["Time", "to", TEST, KEYS, "keys", "by", N, "threads:", SECONDS, "seconds."]
        if words.len() >= 10 && words[0] == "Time" && words[1] == "to" && words[4] == "keys" {
            let keys: f64 = words[3]
                .parse()
                .map_err(|_| format!("memcslap: no key count in `{line}`"))?;
            let seconds: f64 = words[8]
                .parse()
                .map_err(|_| format!("memcslap: no seconds in `{line}`"))?;
            if !(keys > 0.0 && seconds > 0.0) {
                return Err(format!("memcslap: nothing done in `{line}`"));
            }
            return Ok(TestResult {
                name: words[2].to_string(),
                requests: keys,
                rps: keys / seconds,
                p50_ms: None,
                p99_ms: None,
            });
        }
    }
    Err(format!(
        "memcslap printed no `Time to ... keys` line:\n{out}"
    ))
}

/// A wrk latency (`812.00us`, `1.23ms`, `2.00s`) in milliseconds.
fn wrk_milliseconds(s: &str) -> Option<f64> {
    let (number, factor) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|n| n * factor)
}

/// Parses `wrk --latency`: `N requests in ...`, `Requests/sec: X`, the `50%` and `99%` lines of the
/// latency distribution. Non-2xx responses or socket errors make the run an error: a server that
/// answers with errors is not serving the test.
pub fn parse_wrk(name: &str, out: &str) -> Result<TestResult, String> {
    let mut requests = None;
    let mut rps = None;
    let (mut p50, mut p99) = (None, None);
    for line in out.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [n, "requests", "in", ..] => requests = n.parse::<f64>().ok(),
            ["Requests/sec:", x] => rps = x.parse::<f64>().ok(),
            ["50%", x] => p50 = wrk_milliseconds(x),
            ["99%", x] => p99 = wrk_milliseconds(x),
            ["Non-2xx", ..] | ["Socket", "errors:", ..] => {
                return Err(format!("wrk ({name}): `{line}`"));
            }
            _ => {}
        }
    }
    match (requests, rps) {
        (Some(requests), Some(rps)) if requests > 0.0 && rps > 0.0 => Ok(TestResult {
            name: name.to_string(),
            requests,
            rps,
            p50_ms: p50,
            p99_ms: p99,
        }),
        _ => Err(format!("wrk ({name}) reported no requests:\n{out}")),
    }
}

/// Runs a load generator under `timeout` (killed after `limit_s`), with no allocator variables in
/// its environment, and returns its stdout; an error carries its status and stderr.
pub fn run_client(program: &str, args: &[String], limit_s: u64) -> Result<String, String> {
    let mut cmd = Command::new("timeout");
    cmd.arg("-s")
        .arg("KILL")
        .arg(limit_s.to_string())
        .arg(program)
        .args(args);
    for var in ALLOCATOR_VARIABLES {
        cmd.env_remove(var);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("timeout {program}: {e} (is coreutils' `timeout` installed?)"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let why = if out.status.code() == Some(137) || out.status.code() == Some(124) {
            format!("ran past {limit_s} s and was killed")
        } else {
            format!("failed ({})", out.status)
        };
        return Err(format!(
            "{program} {}: {why}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim(),
            stdout.trim()
        ));
    }
    Ok(stdout)
}

/// Sends `request` to `addr` and returns what came back before the peer closed or went quiet.
fn exchange(addr: SocketAddr, request: &[u8]) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_millis(1000)))?;
    s.write_all(request)?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A started server: the process, where it listens, its directory.
pub struct Running {
    /// The server process, or the wrapper (heaptrack's script) that started it.
    child: Child,
    /// The server's own PID (the child's, unless a wrapper started it).
    pid: u32,
    /// Where the load generators connect.
    pub port: u16,
    /// nginx's second (upstream) port, 0 for the others.
    pub upstream_port: u16,
    /// The server's files: configuration, data, logs, dumps.
    pub dir: PathBuf,
    /// Which server.
    pub kind: ServerKind,
}

/// The program and arguments that start `kind` in `dir` on `port` (and nginx's `upstream`).
fn server_command(
    kind: ServerKind,
    settings: &Settings,
    dir: &Path,
    port: u16,
    upstream: u16,
) -> Result<(PathBuf, Vec<String>), String> {
    let d = dir.display();
    Ok(match kind {
        ServerKind::Redis => (
            settings.redis_server.clone(),
            [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                &d.to_string(),
                "--daemonize",
                "no",
            ]
            .map(String::from)
            .to_vec(),
        ),
        ServerKind::Memcached => {
            let mut args: Vec<String> = [
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-m",
                "1024",
                "-t",
                "2",
            ]
            .map(String::from)
            .to_vec();
            // memcached refuses to run as root without a user to switch to.
            if nix::unistd::geteuid().is_root() {
                args.extend(["-u".to_string(), "root".to_string()]);
            }
            (settings.memcached.clone(), args)
        }
        ServerKind::Nginx => {
            std::fs::create_dir_all(dir.join("www")).map_err(|e| format!("{d}/www: {e}"))?;
            // A 4 KiB page: big enough to be a realistic small static file.
            let page: String = "jeprof-shim server benchmark\n".repeat(4096 / 29);
            std::fs::write(dir.join("www/index.html"), page)
                .map_err(|e| format!("{d}/www/index.html: {e}"))?;
            let conf = format!(
                "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log {d}/error.log warn;\n\
                 pid {d}/nginx.pid;\nevents {{ worker_connections 1024; }}\nhttp {{\n  access_log off;\n\
                 \x20 client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
                 \x20 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n\
                 \x20 scgi_temp_path {d}/scgi;\n\
                 \x20 server {{\n    listen 127.0.0.1:{port};\n    root {d}/www;\n\
                 \x20   location /proxy/ {{ proxy_pass http://127.0.0.1:{upstream}/; }}\n  }}\n\
                 \x20 server {{\n    listen 127.0.0.1:{upstream};\n\
                 \x20   location / {{ add_header X-Upstream echo; return 200 \"echo $request_uri $http_user_agent\\n\"; }}\n  }}\n}}\n"
            );
            std::fs::write(dir.join("nginx.conf"), conf)
                .map_err(|e| format!("{d}/nginx.conf: {e}"))?;
            (
                settings.nginx.clone(),
                [
                    "-p",
                    &d.to_string(),
                    "-c",
                    &format!("{d}/nginx.conf"),
                    "-e",
                    &format!("{d}/error.log"),
                ]
                .map(String::from)
                .to_vec(),
            )
        }
    })
}

/// The environment of `variant` (profiles written under `dir`).
pub fn variant_env(variant: Variant, settings: &Settings, dir: &Path) -> Vec<(String, String)> {
    let jemalloc = settings.libjemalloc.display().to_string();
    match variant {
        Variant::Jemalloc | Variant::Again => vec![("LD_PRELOAD".into(), jemalloc)],
        Variant::JemallocProf => vec![
            ("LD_PRELOAD".into(), jemalloc),
            (
                "MALLOC_CONF".into(),
                // prof_final: the dump at exit proves the profiler ran (and is its profile).
                format!(
                    "prof:true,lg_prof_sample:19,prof_final:true,prof_prefix:{}/jeprof",
                    dir.display()
                ),
            ),
        ],
        Variant::Ours => vec![
            ("LD_PRELOAD".into(), settings.preload.display().to_string()),
            (
                "JEPROF_SHIM".into(),
                // `%p`: the PID, so that other processes started with this environment (heaptrack's
                // script and its helpers) write their own dumps rather than over the server's.
                format!(
                    "sample_rate:{},dump_on_exit:{}/ours.%p.heap",
                    settings.rate,
                    dir.display()
                ),
            ),
        ],
        Variant::Glibc => Vec::new(),
    }
}

/// Whether the server answers its protocol's simplest request on `port`.
fn answers(kind: ServerKind, port: u16) -> Result<(), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let (request, expect): (&[u8], &str) = match kind {
        ServerKind::Redis => (b"PING\r\n", "+PONG"),
        ServerKind::Memcached => (b"version\r\n", "VERSION"),
        ServerKind::Nginx => (b"GET /index.html HTTP/1.0\r\n\r\n", "HTTP/1.1 200"),
    };
    let reply = exchange(addr, request).map_err(|e| e.to_string())?;
    if reply.starts_with(expect) {
        Ok(())
    } else {
        Err(format!("answered `{}`, expected `{expect}`", reply.trim()))
    }
}

/// The last lines of a file, for an error message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// The PIDs whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// The executable's file name of a process.
fn exe_name(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

impl Running {
    /// Starts `kind` with `env` in a new directory under `parent`, wrapped by `wrapper` (e.g.
    /// heaptrack's script) if given, and waits until it answers. An error says which server, and
    /// what its log says.
    pub fn start(
        kind: ServerKind,
        settings: &Settings,
        env: &[(String, String)],
        dir: PathBuf,
        wrapper: Option<&[String]>,
    ) -> Result<Running, String> {
        let port = free_port()?;
        let upstream = if kind == ServerKind::Nginx {
            free_port()?
        } else {
            0
        };
        let (program, args) = server_command(kind, settings, &dir, port, upstream)?;
        let log_path = dir.join("server.log");
        let log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = match wrapper {
            Some([first, rest @ ..]) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&program);
                c
            }
            _ => Command::new(&program),
        };
        cmd.args(&args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        for var in ALLOCATOR_VARIABLES {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("{} {}: {e}", kind.key(), program.display()))?;
        let mut running = Running {
            pid: child.id(),
            child,
            port,
            upstream_port: upstream,
            dir,
            kind,
        };
        let deadline = Instant::now() + settings.startup_limit;
        loop {
            if let Ok(Some(status)) = running.child.try_wait() {
                return Err(format!(
                    "{} ({}) exited before answering ({status}); its log:\n{}",
                    kind.key(),
                    program.display(),
                    tail(&log_path)
                ));
            }
            match answers(kind, port) {
                Ok(()) => break,
                Err(why) if Instant::now() > deadline => {
                    let _ = running.child.kill();
                    let _ = running.child.wait();
                    return Err(format!(
                        "{} ({}) did not answer on 127.0.0.1:{port} within {} s ({why}); its log:\n{}",
                        kind.key(),
                        program.display(),
                        settings.startup_limit.as_secs(),
                        tail(&log_path)
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        if wrapper.is_some() {
            // The wrapper runs the server as its child: find it by its executable's name (Debian's
            // redis-server is a link to redis-check-rdb, so that name counts too).
            let want = program
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let pid = children_of(running.pid).into_iter().find(|&p| {
                exe_name(p).is_some_and(|n| {
                    n == want || (kind == ServerKind::Redis && n == "redis-check-rdb")
                })
            });
            running.pid = pid.ok_or_else(|| {
                format!("{}: the wrapper's server process was not found", kind.key())
            })?;
        }
        Ok(running)
    }

    /// The server's own PID.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `SIGTERM` and waits for the process (or its wrapper) to exit, killing it after
    /// 60 s. An error when it had to be killed or exited with a failure.
    pub fn stop(mut self) -> Result<(), String> {
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
        let deadline = Instant::now() + STOP_LIMIT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(format!(
                        "{} exited with {status} after SIGTERM; its log:\n{}",
                        self.kind.key(),
                        tail(&self.dir.join("server.log"))
                    ))
                }
                Ok(None) if Instant::now() > deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "{} did not exit within {} s of SIGTERM and was killed",
                        self.kind.key(),
                        STOP_LIMIT.as_secs()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("waiting for {}: {e}", self.kind.key())),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A run that failed half-way must not leave its server behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A load to drive a server with.
#[derive(Debug, Clone)]
pub enum Load {
    /// The table's load: short, the same every run (see [`Settings`]).
    Table,
    /// The accuracy comparison's: a bigger live heap, still deterministic in size.
    Heap,
}

/// Drives `server` with its load generator and returns what it reported.
pub fn drive(
    server: &Running,
    settings: &Settings,
    load: &Load,
) -> Result<Vec<TestResult>, String> {
    let port = server.port.to_string();
    match server.kind {
        ServerKind::Redis => {
            // -P 1 (no pipelining): every request a round trip, what an interactive client sees;
            // -c 50, redis-benchmark's default; SET/GET/LPUSH/LRANGE_100 allocate strings, dict
            // entries, list nodes and 100-element replies; -d 64 B values and -r random keys
            // grow a live keyspace for the profile to show.
            let (n, tests, size, keys) = match load {
                Load::Table => (
                    settings.redis_requests,
                    "set,get,lpush,lrange_100",
                    "64",
                    "100000",
                ),
                Load::Heap => (200_000, "set,lpush", "512", "1000000"),
            };
            let args: Vec<String> = [
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-n",
                &n.to_string(),
                "-P",
                "1",
                "-c",
                "50",
                "-t",
                tests,
                "-d",
                size,
                "-r",
                keys,
                "--csv",
            ]
            .map(String::from)
            .to_vec();
            let out = run_client("redis-benchmark", &args, 300)?;
            parse_redis_benchmark(&out, n)
        }
        ServerKind::Memcached => {
            let per_thread = match load {
                Load::Table => settings.memcached_per_thread,
                Load::Heap => 10_000,
            };
            let mut results = Vec::new();
            for test in ["set", "get"] {
                let args: Vec<String> = vec![
                    format!("--servers=127.0.0.1:{port}"),
                    "--concurrency=20".into(),
                    format!("--execute-number={per_thread}"),
                    format!("--test={test}"),
                ];
                results.push(parse_memcslap(&run_client("memcslap", &args, 300)?)?);
            }
            Ok(results)
        }
        ServerKind::Nginx => {
            let seconds = match load {
                Load::Table => settings.nginx_seconds,
                Load::Heap => 5,
            };
            let mut results = Vec::new();
            for (name, path) in [("static", "/index.html"), ("proxy", "/proxy/echo")] {
                let args: Vec<String> = vec![
                    "-t1".into(),
                    "-c32".into(),
                    format!("-d{seconds}s"),
                    "--latency".into(),
                    format!("http://127.0.0.1:{port}{path}"),
                ];
                let out = run_client("wrk", &args, seconds + 60)?;
                results.push(parse_wrk(name, &out)?);
            }
            Ok(results)
        }
    }
}

/// The profile `variant` wrote at exit under `dir` for the server process `pid`: ours at
/// `ours.PID.heap`, jemalloc's `jeprof.PID.0.f.heap`. `None` for variants that write none; an error
/// when one is missing (the profiler did not run).
fn profile_written(variant: Variant, dir: &Path, pid: u32) -> Result<Option<PathBuf>, String> {
    let path = match variant {
        Variant::Ours => dir.join(format!("ours.{pid}.heap")),
        Variant::JemallocProf => dir.join(format!("jeprof.{pid}.0.f.heap")),
        _ => return Ok(None),
    };
    if path.is_file() {
        Ok(Some(path))
    } else {
        Err(format!(
            "{} wrote no profile at exit ({} is missing): did it load, and did the server exit cleanly?",
            variant.key(),
            path.display()
        ))
    }
}

/// One run: starts `kind` under `variant` in a new directory under `parent`, drives it, stops it,
/// and checks that the variant's profiler (if any) wrote its dump.
pub fn run_once(
    kind: ServerKind,
    variant: Variant,
    settings: &Settings,
    parent: &Path,
    load: &Load,
) -> Result<RunResult, String> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-{}-", kind.key(), variant.key()))
        .tempdir_in(parent)
        .map_err(|e| format!("a directory under {}: {e}", parent.display()))?
        .keep();
    let env = variant_env(variant, settings, &dir);
    let server = Running::start(kind, settings, &env, dir.clone(), None)?;
    let cpu_before = process_cpu_seconds(server.pid())?;
    let tests = drive(&server, settings, load)?;
    let cpu_after = process_cpu_seconds(server.pid())?;
    let pid = server.pid();
    server.stop()?;
    let profile = profile_written(variant, &dir, pid)?;
    Ok(RunResult {
        tests,
        server_cpu: cpu_after - cpu_before,
        profile,
    })
}

/// Per server and variant, one result per round (`None` where the run failed).
pub type Table = BTreeMap<(ServerKind, Variant), Vec<Option<RunResult>>>;

/// Runs every server under every variant once per round, the variants of a server in a new random
/// order each round (as the churn runner does). Failures are collected, not fatal: a row with
/// holes still has its other pairs.
pub fn run_table(
    servers: &[ServerKind],
    variants: &[Variant],
    rounds: usize,
    settings: &Settings,
    parent: &Path,
    seed: u64,
    progress: bool,
) -> (Table, Vec<String>) {
    let mut table = Table::new();
    let mut failures = Vec::new();
    let mut rng = Xorshift::new(seed);
    for &kind in servers {
        let mut order: Vec<Variant> = variants
            .iter()
            .copied()
            .filter(|v| !(*v == Variant::Glibc && kind.links_jemalloc()))
            .collect();
        for round in 0..rounds {
            rng.shuffle(&mut order);
            if progress {
                eprintln!("{} round {}/{rounds}", kind.key(), round + 1);
            }
            for &variant in &order {
                let result = run_once(kind, variant, settings, parent, &Load::Table);
                let row = table
                    .entry((kind, variant))
                    .or_insert_with(|| vec![None; rounds]);
                match result {
                    Ok(r) => row[round] = Some(r),
                    Err(e) => failures.push(format!(
                        "{} {}, round {round}: {e}",
                        kind.key(),
                        variant.key()
                    )),
                }
            }
        }
    }
    (table, failures)
}

/// One figure of a run, `None` where it has none.
type Metric = dyn Fn(&RunResult) -> Option<f64>;

/// `median [lo, hi]` of paired ratios, or `-`.
fn ratio_cell(ratios: &[f64], rng: &mut Xorshift) -> String {
    match (
        stats::median(ratios),
        stats::bootstrap_median_interval(ratios, rng),
    ) {
        (Some(m), Some((lo, hi))) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
        (Some(m), None) => format!("{m:.3}"),
        _ => "-".to_string(),
    }
}

/// The Markdown table: per server and variant, the median of the runs' throughput, latency and
/// server CPU per request, and each one's paired ratio to plain jemalloc of the same round with a
/// 95% bootstrap interval of the median ratio.
pub fn format_table(table: &Table, rng: &mut Xorshift) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| server | variant | runs | req/s | ratio (95% CI) | p50 ms | p50 ratio | p99 ms | p99 ratio | \
         server CPU µs/req | CPU ratio |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (&(kind, variant), runs) in table {
        let Some(base) = table.get(&(kind, Variant::Jemalloc)) else {
            continue;
        };
        let series = |rows: &[Option<RunResult>], f: &Metric| -> Vec<Option<f64>> {
            rows.iter().map(|r| r.as_ref().and_then(f)).collect()
        };
        let metrics: [&Metric; 4] = [
            &|r| Some(r.throughput()),
            &|r| r.p50(),
            &|r| r.p99(),
            &|r| Some(r.cpu_us_per_request()),
        ];
        let mut cells = Vec::new();
        for (i, metric) in metrics.iter().enumerate() {
            let mine = series(runs, metric);
            let theirs = series(base, metric);
            let present: Vec<f64> = mine.iter().flatten().copied().collect();
            let digits = if i == 0 { 0 } else { 3 };
            cells.push(
                stats::median(&present)
                    .map_or_else(|| "-".to_string(), |m| format!("{m:.digits$}")),
            );
            if variant == Variant::Jemalloc {
                cells.push("1 (baseline)".to_string());
            } else {
                cells.push(ratio_cell(&stats::paired_ratios(&mine, &theirs), rng));
            }
        }
        let ok = runs.iter().flatten().count();
        let _ = writeln!(
            out,
            "| {} | {} | {ok} | {} |",
            kind.key(),
            variant.key(),
            cells.join(" | ")
        );
    }
    out
}

/// One row of `jeprof-compat report --show_bytes --interval`: a function's flat and cum bytes with
/// their 95% intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    /// The function.
    pub name: String,
    /// Bytes allocated in it directly.
    pub flat: f64,
    /// Bytes allocated in it or its callees.
    pub cum: f64,
    /// 95% interval of `cum`.
    pub cum_interval: (f64, f64),
}

/// Parses `jeprof-compat report --show_bytes --interval`: `flat flat% sum% cum cum% [lo, hi]
/// [lo, hi] function`, the function being the rest of the line (C++ names hold spaces).
pub fn parse_report(text: &str) -> Result<Vec<ReportRow>, String> {
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.starts_with("Total:") || line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let bad = || format!("jeprof-compat report: unexpected line `{line}`");
        // Nine whitespace-separated fields, then the name.
        let mut rest = line.trim_start();
        let mut fields = Vec::with_capacity(9);
        for _ in 0..9 {
            let end = rest.find(char::is_whitespace).ok_or_else(bad)?;
            fields.push(&rest[..end]);
            rest = rest[end..].trim_start();
        }
        let number = |s: &str| {
            s.trim_matches(|c| c == '[' || c == ']' || c == ',')
                .parse::<f64>()
                .map_err(|_| bad())
        };
        rows.push(ReportRow {
            name: rest.to_string(),
            flat: number(fields[0])?,
            cum: number(fields[3])?,
            cum_interval: (number(fields[7])?, number(fields[8])?),
        });
    }
    Ok(rows)
}

/// jemalloc's size class for a request of `size` bytes (5.3 on x86_64: 16-byte quantum, four
/// classes per doubling above 128 bytes, the same spacing for large sizes), which is what our
/// estimates count: the sampled path charges each sample with its usable size, as jemalloc's
/// profiler does, while heaptrack records the requested size.
pub fn jemalloc_size_class(size: u64) -> u64 {
    match size {
        0..=8 => 8,
        9..=128 => size.div_ceil(16) * 16,
        _ => {
            // The group (2^(lg-1), 2^lg] holding `size` is split into four classes.
            let lg = 64 - (size - 1).leading_zeros();
            let delta = 1u64 << (lg - 3);
            size.div_ceil(delta) * delta
        }
    }
}

/// heaptrack's live heap at the end of a trace, per function: bytes as requested, bytes in
/// jemalloc's size classes, and objects, each function counted once per stack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeaptrackLive {
    /// Per function: (requested bytes, size-class bytes, objects).
    pub functions: BTreeMap<String, (f64, f64, f64)>,
    /// Every live block: requested bytes.
    pub requested_total: f64,
    /// Every live block: size-class bytes.
    pub usable_total: f64,
}

/// Reads an interpreted heaptrack trace (what `heaptrack` writes, decompressed; file format 3 of
/// heaptrack 1.4): `s` strings, `i` instruction pointers (`ip module [function file line]...`,
/// inlined frames first), `t` trace nodes (`ip parent`), `a` allocation infos (`size trace`), `+`
/// and `-` for each allocation and free of an info; numbers in hex, indices from 1 (infos from 0).
/// The live count of each info is its `+` lines minus its `-` lines.
pub fn heaptrack_live(trace: impl std::io::BufRead) -> Result<HeaptrackLive, String> {
    let mut strings: Vec<String> = Vec::new();
    // Per ip: the string indices of its function names (inlined first); empty when unresolved.
    let mut ips: Vec<Vec<usize>> = Vec::new();
    // Per trace node: (ip index, parent trace index), 1-based, 0 = root.
    let mut nodes: Vec<(usize, usize)> = Vec::new();
    let mut infos: Vec<(u64, usize)> = Vec::new();
    let mut live: Vec<i64> = Vec::new();
    let hex = |s: Option<&str>, line: &str| -> Result<u64, String> {
        s.and_then(|s| u64::from_str_radix(s, 16).ok())
            .ok_or_else(|| format!("heaptrack trace: bad line `{line}`"))
    };
    for line in trace.lines() {
        let line = line.map_err(|e| format!("heaptrack trace: {e}"))?;
        let mut f = line.split(' ');
        match f.next() {
            Some("s") => {
                // `s LEN TEXT`: the text may hold spaces.
                strings.push(line.splitn(3, ' ').nth(2).unwrap_or("").to_string());
            }
            Some("i") => {
                let fields: Vec<&str> = f.collect();
                // ip, module, then (function, file, line) triples.
                let functions = fields
                    .get(2..)
                    .unwrap_or(&[])
                    .chunks(3)
                    .filter_map(|c| usize::from_str_radix(c[0], 16).ok())
                    .collect();
                ips.push(functions);
            }
            Some("t") => {
                let ip = hex(f.next(), &line)? as usize;
                let parent = hex(f.next(), &line)? as usize;
                nodes.push((ip, parent));
            }
            Some("a") => {
                let size = hex(f.next(), &line)?;
                let trace = hex(f.next(), &line)? as usize;
                infos.push((size, trace));
                live.push(0);
            }
            Some(sign @ ("+" | "-")) => {
                let info = hex(f.next(), &line)? as usize;
                let slot = live
                    .get_mut(info)
                    .ok_or_else(|| format!("heaptrack trace: `{line}` names no allocation info"))?;
                *slot += if sign == "+" { 1 } else { -1 };
            }
            _ => {}
        }
    }
    let mut out = HeaptrackLive::default();
    for (&(size, leaf), &count) in infos.iter().zip(&live) {
        if count <= 0 {
            continue;
        }
        let count = count as f64;
        let requested = size as f64 * count;
        let usable = jemalloc_size_class(size) as f64 * count;
        out.requested_total += requested;
        out.usable_total += usable;
        let mut names = BTreeSet::new();
        let mut node = leaf;
        // A trace is a chain towards the root; the bound guards against a malformed cycle.
        for _ in 0..nodes.len() {
            let Some(&(ip, parent)) = node.checked_sub(1).and_then(|i| nodes.get(i)) else {
                break;
            };
            let functions = ip.checked_sub(1).and_then(|i| ips.get(i));
            for &name in functions.into_iter().flatten() {
                if let Some(n) = name.checked_sub(1).and_then(|i| strings.get(i)) {
                    names.insert(n.as_str());
                }
            }
            node = parent;
        }
        for name in names {
            let e = out
                .functions
                .entry(name.to_string())
                .or_insert((0.0, 0.0, 0.0));
            e.0 += requested;
            e.1 += usable;
            e.2 += count;
        }
    }
    Ok(out)
}

/// One function of the accuracy comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// The function (named alike by both).
    pub name: String,
    /// heaptrack's exact live bytes in it or its callees.
    pub truth: f64,
    /// Our estimate of the same.
    pub estimate: f64,
    /// Our 95% interval.
    pub interval: (f64, f64),
}

impl Compared {
    /// Whether the truth lies in our interval.
    pub fn covered(&self) -> bool {
        self.interval.0 <= self.truth && self.truth <= self.interval.1
    }

    /// `(estimate - truth) / truth`.
    pub fn relative_error(&self) -> f64 {
        (self.estimate - self.truth) / self.truth
    }
}

/// Every function both name whose true live bytes are at least `min_share` of `total_truth`,
/// largest truth first. A function heaptrack names that our report does not (no sample reached
/// it) is compared with an estimate of 0 and interval [0, 0] when it is big enough, so that
/// missing sites count against coverage.
pub fn compare(
    truth: &BTreeMap<String, f64>,
    ours: &[ReportRow],
    total_truth: f64,
    min_share: f64,
    known_to_us: &dyn Fn(&str) -> bool,
) -> Vec<Compared> {
    let ours: BTreeMap<&str, &ReportRow> = ours.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut out: Vec<Compared> = truth
        .iter()
        .filter(|(name, &t)| t >= min_share * total_truth && known_to_us(name))
        .map(|(name, &t)| {
            let (estimate, interval) = ours
                .get(name.as_str())
                .map_or((0.0, (0.0, 0.0)), |r| (r.cum, r.cum_interval));
            Compared {
                name: name.clone(),
                truth: t,
                estimate,
                interval,
            }
        })
        .collect();
    out.sort_by(|a, b| b.truth.total_cmp(&a.truth));
    out
}

/// Runs `jeprof-compat report` with `args` and returns its stdout.
pub fn jeprof_compat_report(jeprof_compat: &Path, args: &[String]) -> Result<String, String> {
    let out = Command::new(jeprof_compat)
        .arg("report")
        .args(args)
        .output()
        .map_err(|e| {
            format!(
                "{}: {e} (build it: cargo build --release -p jeprof-compat)",
                jeprof_compat.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "jeprof-compat report {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `Total: N B` of a `--show_bytes` report.
fn report_total(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("Total:"))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// What the accuracy comparison of one server found.
#[derive(Debug, Clone)]
pub struct Accuracy {
    /// Which server.
    pub kind: ServerKind,
    /// heaptrack's live bytes at exit, every stack, in jemalloc's size classes.
    pub truth_total: f64,
    /// The same as requested.
    pub requested_total: f64,
    /// Our estimate of the same (the report's `Total:`).
    pub estimate_total: f64,
    /// The smallest share of `truth_total` a function compared has.
    pub min_share: f64,
    /// The functions compared, largest truth first.
    pub functions: Vec<Compared>,
    /// Where heaptrack's trace and our dump are.
    pub dir: PathBuf,
}

/// Whether heaptrack gave a frame a name that can match ours: not an unresolved address
/// (`0x55...`) nor `<unresolved function>`, which our report names differently.
pub fn named_alike(name: &str) -> bool {
    !(name.starts_with("0x") || name.starts_with('<') || name == "??")
}

/// Runs `kind` under heaptrack with our library loaded behind it (`LD_PRELOAD` = heaptrack's
/// then ours: heaptrack's `malloc` records the call and calls the next `malloc`, ours), drives it
/// with the [`Load::Heap`] load, stops it with `SIGTERM`, and compares heaptrack's live bytes at
/// exit per function (in it or its callees, from its trace: [`heaptrack_live`], in jemalloc's size
/// classes) with our dump's estimates and 95% intervals, for every function both name with at least
/// `min_share` of the live bytes.
pub fn compare_with_heaptrack(
    kind: ServerKind,
    settings: &Settings,
    parent: &Path,
    jeprof_compat: &Path,
    min_share: f64,
) -> Result<Accuracy, String> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-heaptrack-", kind.key()))
        .tempdir_in(parent)
        .map_err(|e| format!("a directory under {}: {e}", parent.display()))?
        .keep();
    let env = variant_env(Variant::Ours, settings, &dir);
    let trace = dir.join("heaptrack");
    let wrapper = vec![
        "heaptrack".to_string(),
        "-o".to_string(),
        trace.display().to_string(),
    ];
    let server = Running::start(kind, settings, &env, dir.clone(), Some(&wrapper))?;
    drive(&server, settings, &Load::Heap)?;
    let pid = server.pid();
    server.stop()?;
    let dump = profile_written(Variant::Ours, &dir, pid)?.ok_or("no dump")?;
    let trace_file = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("heaptrack."))
        })
        .ok_or_else(|| format!("heaptrack wrote no trace under {}", dir.display()))?;
    // The trace itself rather than heaptrack_print's summaries: they give requested bytes only,
    // while our estimates are of jemalloc's size classes.
    let mut zstdcat = Command::new("zstdcat")
        .arg(&trace_file)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "zstdcat {}: {e} (apt-get install zstd)",
                trace_file.display()
            )
        })?;
    let stdout = zstdcat.stdout.take().ok_or("zstdcat: no stdout")?;
    let live = heaptrack_live(std::io::BufReader::new(stdout));
    let status = zstdcat.wait().map_err(|e| format!("zstdcat: {e}"))?;
    let live = live?;
    if !status.success() {
        return Err(format!("zstdcat {}: {status}", trace_file.display()));
    }
    let truth: BTreeMap<String, f64> = live
        .functions
        .iter()
        .map(|(name, figures)| (name.clone(), figures.1))
        .collect();
    let truth_total = live.usable_total;
    let report = jeprof_compat_report(
        jeprof_compat,
        &[
            "--show_bytes".to_string(),
            "--interval".to_string(),
            dump.display().to_string(),
        ],
    )?;
    let rows = parse_report(&report)?;
    let estimate_total = report_total(&report).unwrap_or(0.0);
    let functions = compare(&truth, &rows, truth_total, min_share, &named_alike);
    Ok(Accuracy {
        kind,
        truth_total,
        requested_total: live.requested_total,
        estimate_total,
        min_share,
        functions,
        dir,
    })
}

/// The Markdown of one server's comparison: totals, coverage, and the `top` largest functions.
pub fn format_accuracy(a: &Accuracy, top: usize) -> String {
    let mut out = String::new();
    let covered = a.functions.iter().filter(|c| c.covered()).count();
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let mut errors: Vec<f64> = a
        .functions
        .iter()
        .take(5)
        .map(|c| c.relative_error().abs())
        .collect();
    errors.sort_by(f64::total_cmp);
    let _ = writeln!(
        out,
        "{}: heaptrack's live heap at exit {:.2} MiB in jemalloc's size classes ({:.2} MiB as \
         requested), ours {:.2} MiB ({:+.1}%). {} functions named alike with at least {}% of it: \
         the truth inside our 95% interval for {covered} ({:.0}%); median |error| of the 5 largest \
         {:.1}%\n",
        a.kind.key(),
        mib(a.truth_total),
        mib(a.requested_total),
        mib(a.estimate_total),
        100.0 * (a.estimate_total - a.truth_total) / a.truth_total,
        a.functions.len(),
        100.0 * a.min_share,
        100.0 * covered as f64 / a.functions.len().max(1) as f64,
        100.0 * stats::median(&errors).unwrap_or(f64::NAN),
    );
    let _ = writeln!(
        out,
        "| function (cum) | heaptrack B | ours B | our 95% interval | error | in interval |\n\
         |---|---|---|---|---|---|"
    );
    for c in a.functions.iter().take(top) {
        let _ = writeln!(
            out,
            "| `{}` | {:.0} | {:.0} | [{:.0}, {:.0}] | {:+.1}% | {} |",
            c.name,
            c.truth,
            c.estimate,
            c.interval.0,
            c.interval.1,
            100.0 * c.relative_error(),
            if c.covered() { "yes" } else { "**no**" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_ticks_skip_a_command_name_with_spaces_and_parentheses() {
        let stat =
            "4242 (redis (x) srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 128 397 0 0 20 0 5 0 \
                    1000 100000 500 18446744073709551615";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(128 + 397));
    }

    #[test]
    fn redis_benchmark_csv_gives_rate_and_percentiles_per_test() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"30395.14\",\"1.108\",\"0.144\",\"0.743\",\"3.327\",\"6.447\",\"31.327\"\n\
                   \"LRANGE_100 (first 100 elements)\",\"17301.04\",\"2.128\",\"0.288\",\"1.087\",\
                   \"7.583\",\"11.007\",\"22.767\"\n";
        let r = parse_redis_benchmark(csv, 1000).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "SET");
        assert_eq!(r[0].rps, 30395.14);
        assert_eq!(r[0].p50_ms, Some(0.743));
        assert_eq!(r[1].name, "LRANGE_100 (first 100 elements)");
        assert_eq!(r[1].p99_ms, Some(11.007));
    }

    #[test]
    fn redis_benchmark_without_rows_is_an_error() {
        let header = "\"test\",\"rps\",\"p50_latency_ms\",\"p99_latency_ms\"\n";
        assert!(parse_redis_benchmark(header, 10).is_err());
        assert!(parse_redis_benchmark("", 10).is_err());
    }

    #[test]
    fn memcslap_keys_over_seconds_is_the_rate() {
        let out = "Time to start            20 threads:                  0.001 seconds.\n\
                   ----\nTime to set          100000 keys by   20 threads:     2.000 seconds.\n\
                   Time total:                                           2.032 seconds.\n";
        let r = parse_memcslap(out).unwrap();
        assert_eq!(
            (r.name.as_str(), r.requests, r.rps),
            ("set", 100000.0, 50000.0)
        );
        assert!(parse_memcslap("Failed to FLUSH: CONNECTION FAILURE").is_err());
    }

    #[test]
    fn wrk_latencies_are_read_in_milliseconds_and_errors_fail_the_run() {
        let out =
            "Running 2s test @ http://127.0.0.1:1/\n  Latency Distribution\n     50%  812.00us\n\
                   \x20    75%    1.00ms\n     90%    1.50ms\n     99%    2.50ms\n\
                   \x20 40000 requests in 2.00s, 1.00MB read\nRequests/sec:  20000.00\n";
        let r = parse_wrk("static", out).unwrap();
        assert_eq!(r.requests, 40000.0);
        assert_eq!(r.rps, 20000.0);
        assert!((r.p50_ms.unwrap() - 0.812).abs() < 1e-12);
        assert_eq!(r.p99_ms, Some(2.5));
        let failing = format!("{out}  Non-2xx or 3xx responses: 40000\n");
        assert!(parse_wrk("static", &failing).is_err());
    }

    #[test]
    fn report_rows_keep_names_with_spaces_and_read_the_cum_interval() {
        let text = "Total: 3000 B\n# columns: flat flat% sum% cum cum% [flat 95% interval] [cum 95% interval] function\n\
                    \x20   1000  33.3%  33.3%     3000 100.0%          [500, 1500]          [2000, 4000] operator new(unsigned long)\n";
        let rows = parse_report(text).unwrap();
        assert_eq!(
            rows,
            vec![ReportRow {
                name: "operator new(unsigned long)".into(),
                flat: 1000.0,
                cum: 3000.0,
                cum_interval: (2000.0, 4000.0),
            }]
        );
        assert!(parse_report("12 garbage\n").is_err());
    }

    #[test]
    fn jemalloc_size_classes_round_up_to_the_next_class() {
        let cases = [
            (0, 8),
            (1, 8),
            (8, 8),
            (9, 16),
            (24, 32),
            (100, 112),
            (128, 128),
            (129, 160),
            (256, 256),
            (257, 320),
            (517, 640),
            (4096, 4096),
            (4097, 5120),
            (16385, 20480),
            (1 << 20, 1 << 20),
        ];
        for (size, class) in cases {
            assert_eq!(jemalloc_size_class(size), class, "size {size}");
        }
    }

    #[test]
    fn heaptrack_live_counts_allocations_minus_frees_once_per_function_per_stack() {
        // main -> f -> f (recursion) -> zmalloc allocates 0x64 = 100 B twice and frees once;
        // main -> g allocates 0x200 = 512 B once; an unresolved ip names nothing.
        let trace = "v 10400 3\ns 4 main\ns 1 f\ns 1 g\ns 7 zmalloc\ns 4 file\n\
                     i 1000 1 1 5 1\ni 1001 1 2 5 2\ni 1002 1 4 5 3\ni 1003 1 3 5 4\ni 1004 1\n\
                     t 1 0\nt 2 1\nt 2 2\nt 3 3\nt 4 1\nt 5 5\n\
                     a 64 4\na 200 6\n+ 0\n+ 0\n- 0\n+ 1\nc 10\n";
        let live = heaptrack_live(trace.as_bytes()).unwrap();
        assert_eq!(live.requested_total, 100.0 + 512.0);
        assert_eq!(live.usable_total, 112.0 + 512.0);
        assert_eq!(live.functions["main"], (612.0, 624.0, 2.0));
        assert_eq!(live.functions["f"], (100.0, 112.0, 1.0));
        assert_eq!(live.functions["zmalloc"], (100.0, 112.0, 1.0));
        assert_eq!(live.functions["g"], (512.0, 512.0, 1.0));
        assert_eq!(live.functions.len(), 4);
        assert!(heaptrack_live("+ 7\n".as_bytes()).is_err());
    }

    #[test]
    fn a_site_we_never_sampled_counts_as_uncovered() {
        let truth: BTreeMap<String, f64> = [
            ("big".to_string(), 900.0),
            ("missed".to_string(), 100.0),
            ("tiny".to_string(), 1.0),
        ]
        .into();
        let ours = vec![ReportRow {
            name: "big".into(),
            flat: 0.0,
            cum: 950.0,
            cum_interval: (800.0, 1100.0),
        }];
        let c = compare(&truth, &ours, 1000.0, 0.01, &|_| true);
        assert_eq!(c.len(), 2, "`tiny` is below 1% of the total");
        assert!(c[0].covered());
        assert_eq!(c[1].name, "missed");
        assert!(!c[1].covered());
        assert!((c[0].relative_error() - 50.0 / 900.0).abs() < 1e-12);
    }

    #[test]
    fn the_table_pairs_each_variant_with_jemalloc_of_the_same_round() {
        let run = |rps: f64| {
            Some(RunResult {
                tests: vec![TestResult {
                    name: "t".into(),
                    requests: 1000.0,
                    rps,
                    p50_ms: Some(1.0),
                    p99_ms: Some(2.0),
                }],
                server_cpu: 0.5,
                profile: None,
            })
        };
        let mut table = Table::new();
        table.insert(
            (ServerKind::Redis, Variant::Jemalloc),
            vec![run(100.0), run(200.0), run(300.0)],
        );
        table.insert(
            (ServerKind::Redis, Variant::Ours),
            vec![run(99.0), run(198.0), run(297.0)],
        );
        let text = format_table(&table, &mut Xorshift::new(1));
        let ours = text.lines().find(|l| l.contains("| ours |")).unwrap();
        // Every round's ratio is 0.99, though the rounds differ threefold.
        assert!(ours.contains("0.990 [0.990, 0.990]"), "{ours}");
    }
}
