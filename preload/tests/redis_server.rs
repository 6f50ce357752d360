//! Debian's `redis-server`, unmodified and preloaded (with `dump_on_exit`, sequenced dumps and the
//! `http` listener set through `JEPROF_SHIM`), answers `redis-benchmark` on a loopback port and
//! plain commands correctly, serves its profile over HTTP while running, writes interval dumps,
//! and at `SHUTDOWN NOSAVE` writes a final dump and a dump at exit that our reader parses and that
//! names redis's own allocation functions (its `zmalloc` family and their callers). Everything is
//! bounded in time; the server is killed on any failure. Without redis installed the test says so
//! and passes, except under CI (`CI=true`), where redis is required (`.ci/run` installs it).

#[path = "../../shim/tests/common/http.rs"]
mod client;
mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{preloaded, read_dump};

/// The benchmark's commands (LPUSH fills the list LRANGE reads): strings, counters and lists reach
/// redis's allocator paths (sds strings, objects, quicklist nodes, client buffers); few enough to
/// keep CI's time (5 to 10 s per 100,000 requests with a debug build of the library on two loaded
/// cores).
const BENCHMARKS: &str = "set,get,incr,lpush,lrange_100";

/// R: small enough that the few megabytes redis holds at exit (the benchmark's list, its keys,
/// the clients' buffers) give a few hundred samples.
const SAMPLE_RATE: u64 = 16_384;

/// Bytes allocated between two sequenced dumps: the benchmark allocates far more.
const INTERVAL: u64 = 32 << 20;

/// Seconds any one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(240);

/// Whether `tool` is on `PATH`.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// The server, killed when dropped (on every failure path).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `command` to completion within `limit`, killing it past that.
fn run_bounded(mut command: Command, limit: Duration) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "{command:?} took over {limit:?}; it printed:\n{}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `redis-cli -p <port> <args>`'s answer, trimmed.
fn cli(port: u16, args: &[&str]) -> String {
    let mut command = Command::new("redis-cli");
    command.arg("-p").arg(port.to_string()).args(args);
    let output = run_bounded(command, Duration::from_secs(30));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn redis_server_preloaded_answers_the_benchmark_and_dumps_at_exit() {
    let missing: Vec<&str> = ["redis-server", "redis-benchmark", "redis-cli"]
        .into_iter()
        .filter(|tool| !on_path(tool))
        .collect();
    if !missing.is_empty() {
        assert!(
            !jeprof_conformance::in_ci(),
            "CI must install redis-server and redis-tools: {missing:?} not on PATH"
        );
        eprintln!(
            "SKIPPED redis_server_preloaded_answers_the_benchmark_and_dumps_at_exit: {missing:?} \
             not on PATH (apt-get install redis-server redis-tools)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (port, http_port) = (
        jeprof_conformance::free_port(),
        jeprof_conformance::free_port(),
    );
    let pattern = dir.path().join("redis.%p.prof");
    let mut command = preloaded(
        Command::new("redis-server"),
        &format!(
            "sample_rate:{SAMPLE_RATE},dump_on_exit:{},http:127.0.0.1:{http_port},\
             dump_prefix:{},dump_interval:{INTERVAL},max_dumps:3,dump_final:true",
            pattern.display(),
            dir.path().join("seq").display()
        ),
    );
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut server = Server(command.spawn().expect("cannot start redis-server"));
    let pid = server.0.id();
    wait_until("redis-server accepting connections", STEP_LIMIT, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });

    let mut benchmark = Command::new("redis-benchmark");
    benchmark
        .args([
            "-p",
            &port.to_string(),
            "-n",
            "100000",
            "-q",
            "-t",
            BENCHMARKS,
        ])
        .arg("--csv");
    let output = run_bounded(benchmark, STEP_LIMIT);
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "redis-benchmark failed:\n{report}");
    for test in ["SET", "GET", "INCR", "LPUSH", "LRANGE_100"] {
        assert!(
            report
                .lines()
                .any(|line| line.starts_with(&format!("\"{test}")) && line.contains("\",\"")),
            "no figures for {test}:\n{report}"
        );
    }
    // The server still answers correctly after the load.
    assert_eq!(cli(port, &["SET", "preload:check", "forty-two"]), "OK");
    assert_eq!(cli(port, &["GET", "preload:check"]), "forty-two");
    assert_eq!(cli(port, &["APPEND", "preload:check", "!"]), "10");
    assert_eq!(cli(port, &["GET", "preload:check"]), "forty-two!");
    let list_length: u64 = cli(port, &["LLEN", "mylist"]).parse().unwrap();
    assert!(
        list_length >= 600,
        "the benchmark's list has {list_length} items"
    );

    // redis asks jemalloc for its statistics (`mallctl`) by the plain names of Debian's system
    // jemalloc: the library answers them from the jemalloc that holds redis's memory, so the
    // allocator's figure is at least the list the benchmark left (600+ items) and not the few
    // KiB an idle second jemalloc reports.
    let memory = cli(port, &["INFO", "memory"]);
    let allocated: u64 = memory
        .lines()
        .find_map(|line| line.strip_prefix("allocator_allocated:"))
        .unwrap_or_else(|| panic!("no allocator_allocated in INFO memory:\n{memory}"))
        .trim()
        .parse()
        .unwrap();
    assert!(
        allocated > 1 << 20,
        "INFO memory's allocator_allocated is {allocated} B: redis's mallctl did not reach the \
         preloaded jemalloc"
    );

    // The listener `http:` started serves the live profile.
    let addr: SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
    let heap = client::get(addr, "/pprof/heap").expect("the http listener answers");
    assert_eq!(heap.status, 200, "{}", heap.text());
    jeprof_dumpfmt::read::parse(&heap.body).expect("/pprof/heap is a heap_v2 profile");

    // SHUTDOWN NOSAVE: redis exits normally, and the exit hook dumps.
    let _ = cli(port, &["SHUTDOWN", "NOSAVE"]);
    wait_until("redis-server exiting", STEP_LIMIT, || {
        server.0.try_wait().unwrap().is_some()
    });
    let dump = dir.path().join(format!("redis.{pid}.prof"));
    assert!(
        Path::new(&dump).is_file(),
        "no dump at exit; files: {:?}",
        std::fs::read_dir(dir.path()).unwrap().collect::<Vec<_>>()
    );
    // The automatic dumps: interval dumps while the benchmark ran (at most `max_dumps` kept) and
    // the final one at exit, named `seq.<pid>.<seq>.<kind>.heap`.
    let sequenced: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&format!("seq.{pid}.")))
        .collect();
    assert!(
        sequenced.iter().any(|n| n.contains(".i"))
            && sequenced.iter().any(|n| n.ends_with(".f.heap")),
        "interval and final dumps: {sequenced:?}"
    );
    assert!(sequenced.len() <= 3, "max_dumps:3 kept {sequenced:?}");
    for name in &sequenced {
        read_dump(&dir.path().join(name));
    }
    let profile = read_dump(&dump);
    assert!(!profile.stacks.is_empty(), "the dump has no samples");
    let names: Vec<&String> = profile
        .symbols
        .iter()
        .flat_map(|s| s.names.values())
        .flatten()
        .collect();
    // Every redis allocation goes through its zmalloc family; which callers hold samples at exit
    // varies with the sampling, so any of redis's own allocating functions will do.
    let named = |functions: &[&str]| {
        names
            .iter()
            .any(|n| functions.iter().any(|f| n.contains(f)))
    };
    assert!(
        named(&["zmalloc", "zcalloc", "zrealloc"]),
        "the dump does not name redis's zmalloc family: {names:?}"
    );
    assert!(
        named(&[
            "sdsnewlen",
            "createClient",
            "initServer",
            "createObject",
            "dictCreate",
            "quicklistCreate",
            "lpNew",
            "pushGenericCommand",
            "readQueryFromClient",
        ]),
        "the dump names none of redis's allocating functions: {names:?}"
    );
}
