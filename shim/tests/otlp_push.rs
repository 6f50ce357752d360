//! `otlp_push:URL`: the profile reaches a collector as an OTLP/HTTP POST (method, path, headers,
//! a body that decodes to the process's profile, gzipped with `otlp_compression:gzip`, checked by
//! the rules of Grafana Pyroscope's and the OpenTelemetry Collector's handlers), started from
//! `JEPROF_SHIM` before `main`; a
//! dead collector (a closed port) and a silent one (accepts, never answers) leave the program
//! running, with attempts bounded per profile and at most one profile queued. One child process
//! per behaviour; the collector is a std `TcpListener` in the child.

#[path = "common/http.rs"]
mod client;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jeprof_shim::jeprof_dumpfmt::otlp::{self, any_value::Value};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Attempts per profile the pusher makes at most (its documented bound).
const MAX_ATTEMPTS: u64 = 4;

/// Buffers that stay live, allocated under a name the profile must show.
#[inline(never)]
fn hold_buffers_for_the_collector() -> Vec<Vec<u8>> {
    (0..256)
        .map(|i| std::hint::black_box(vec![i as u8; 64 << 10]))
        .collect()
}

/// A request as the collector received it.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Reads one HTTP/1.1 request (head, then `Content-Length` bytes of body).
fn read_request(stream: &mut TcpStream) -> Request {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap();
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .expect("a Content-Length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Request {
        method,
        path,
        headers,
        body,
    }
}

/// Accepts one connection, waiting at most a minute.
fn accept_one(listener: &TcpListener) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no push within a minute");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Waits (doing allocation work on this thread meanwhile, to show it never waits for the
/// collector) until `done` holds of the pusher's figures; fails after a minute.
fn work_until(done: impl Fn(&jeprof_shim::OtlpPushStats) -> bool) -> jeprof_shim::OtlpPushStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rounds = 0u64;
    loop {
        let stats = jeprof_shim::stats().otlp;
        check_accounting(&stats);
        if done(&stats) {
            assert!(rounds > 0 || stats.profiles > 0);
            return stats;
        }
        assert!(Instant::now() < deadline, "still waiting: {stats:?}");
        let work: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 4096]).collect();
        std::hint::black_box(work);
        rounds += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every profile is sent, dropped or queued; the queue holds one; attempts are bounded per
/// profile.
fn check_accounting(s: &jeprof_shim::OtlpPushStats) {
    // The counters are read one at a time while the pusher runs: one profile's steps may fall
    // between two reads, so the sum may be off by one either way.
    let accounted = s.sent + s.dropped + s.queued;
    assert!(accounted.abs_diff(s.profiles) <= 1, "{s:?}");
    assert!(s.queued <= 1, "{s:?}");
    assert!(
        s.failed_attempts <= MAX_ATTEMPTS * (s.profiles + 1),
        "{s:?}"
    );
}

/// What Grafana Pyroscope's `POST /v1development/profiles` handler (pkg/ingester/otlp,
/// `ingest_handler.go` and `convert.go`) and the OpenTelemetry Collector's OTLP/HTTP receiver
/// (`otlpreceiver`, with the `service.profilesSupport` feature gate) check before they take a
/// request, applied to what the collector received: neither server can run here, so the test is
/// their rules. Both: the path, `Content-Type: application/x-protobuf`, a `Content-Encoding` of
/// `gzip` (any case) read as gzip or none; Pyroscope: a body that decodes, a dictionary, resource
/// profiles, each profile's sample type, one value per sample, every index in range
/// (`otlp::check_references`). Returns the decoded request and the body's size on the wire and
/// decoded.
fn accepted_by_pyroscope_and_the_collector(
    request: &Request,
    gzip: bool,
) -> (otlp::ExportProfilesServiceRequest, usize, usize) {
    assert_eq!(request.method, "POST");
    assert!(
        request.path.ends_with("/v1development/profiles"),
        "{}",
        request.path
    );
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header("content-type"), Some("application/x-protobuf"));
    let encoding = header("content-encoding");
    let body = if gzip {
        assert!(encoding.is_some_and(|e| e.eq_ignore_ascii_case("gzip")));
        otlp::gunzip(&request.body).expect("a gzip body")
    } else {
        assert_eq!(
            encoding, None,
            "no Content-Encoding without otlp_compression"
        );
        request.body.clone()
    };
    let decoded = otlp::decode(&body).expect("an ExportProfilesServiceRequest");
    otlp::check_references(&decoded).expect("what Pyroscope's converter reads");
    (decoded, request.body.len(), body.len())
}

/// The child started with `JEPROF_SHIM=...,otlp_push:http://127.0.0.1:<port>/base,...`
/// (`otlp_compression:gzip` when `gzip`): the pusher was started before `main`; this child is
/// the collector.
fn child_receives(port: u16, gzip: bool) {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let held = hold_buffers_for_the_collector();
    let mut stream = accept_one(&listener);
    let request = read_request(&mut stream);
    stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    drop(stream);
    assert_eq!(request.path, "/base/v1development/profiles");
    assert!(
        request
            .headers
            .iter()
            .any(|(n, a)| n == "user-agent" && a.starts_with("jeprof-shim/")),
        "{:?}",
        request.headers
    );
    let (decoded, wire, decoded_len) = accepted_by_pyroscope_and_the_collector(&request, gzip);
    println!("request: {wire} bytes on the wire, {decoded_len} decoded (gzip: {gzip})");
    let d = decoded.dictionary.as_ref().expect("a dictionary");
    let text = |i: i32| d.string_table[i as usize].as_str();
    assert_eq!(decoded.resource_profiles.len(), 1);
    let resource = &decoded.resource_profiles[0];
    let attribute = |key: &str| {
        resource
            .resource
            .as_ref()
            .unwrap()
            .attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.clone()?.value)
    };
    assert_eq!(
        attribute("service.name"),
        Some(Value::StringValue("checkout".into()))
    );
    assert_eq!(
        attribute("process.pid"),
        Some(Value::IntValue(i64::from(std::process::id())))
    );
    assert!(matches!(
        attribute("process.executable.build_id.gnu"),
        Some(Value::StringValue(id)) if !id.is_empty()
    ));
    let scope = &resource.scope_profiles[0];
    assert_eq!(scope.scope.as_ref().unwrap().name, "jeprof-shim");
    let types: Vec<&str> = scope
        .profiles
        .iter()
        .map(|p| text(p.sample_type.as_ref().unwrap().type_strindex))
        .collect();
    assert_eq!(
        types,
        [
            "inuse_space",
            "inuse_objects",
            "alloc_objects",
            "alloc_space"
        ]
    );
    // The held buffers (16 MiB) are in use, under the function that allocated them.
    let inuse = &scope.profiles[0];
    assert_eq!(inuse.period, 4096);
    let under_holder: i64 = inuse
        .samples
        .iter()
        .filter(|s| {
            d.stack_table[s.stack_index as usize]
                .location_indices
                .iter()
                .flat_map(|&l| &d.location_table[l as usize].lines)
                .any(|line| {
                    let f = &d.function_table[line.function_index as usize];
                    text(f.name_strindex).contains("hold_buffers_for_the_collector")
                })
        })
        .map(|s| s.values[0])
        .sum();
    let held_bytes = (256 * (64 << 10)) as i64;
    assert!(
        under_holder > held_bytes / 2 && under_holder < held_bytes * 2,
        "{under_holder} bytes under the holder, {held_bytes} held"
    );
    drop(held);
    work_until(|s| s.sent >= 1);
}

/// A collector whose port is closed: every attempt fails at once; the program goes on.
fn child_dead_collector() {
    let port = jeprof_conformance::free_port();
    jeprof_shim::configure(&format!(
        "otlp_push:http://127.0.0.1:{port},otlp_interval:0.2"
    ))
    .unwrap();
    let stats = work_until(|s| s.profiles >= 4 && s.failed_attempts >= 4);
    assert_eq!(stats.sent, 0, "{stats:?}");
    assert!(stats.dropped >= 2, "{stats:?}");
}

/// A collector that accepts and never answers: attempts end at their timeout, so they go on
/// failing (not hanging) while the program's own work, a snapshot and a dump included, goes on.
fn child_silent_collector() {
    let held = hold_buffers_for_the_collector();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&accepted);
    std::thread::spawn(move || {
        // Connections are held open, unanswered, until the process ends.
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream.unwrap());
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    jeprof_shim::configure(&format!(
        "otlp_push:http://127.0.0.1:{port},otlp_interval:0.4"
    ))
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while accepted.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no connection within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A push is waiting on the silent collector now; the profiler serves this thread regardless.
    assert!(!jeprof_shim::snapshot().stacks.is_empty());
    let mut dump = Vec::new();
    jeprof_shim::dump_to(&mut dump).unwrap();
    assert!(dump.windows(8).any(|w| w == b"heap_v2/"));
    drop(held);
    let stats = work_until(|s| s.failed_attempts >= 3);
    assert_eq!(stats.sent, 0, "{stats:?}");
    // Each attempt opens one connection: the retries are what the collector saw.
    let connections = accepted.load(Ordering::SeqCst);
    let attempts = jeprof_shim::stats().otlp.failed_attempts + 1;
    assert!(
        connections <= attempts,
        "{connections} connections for {attempts} attempts"
    );
}

fn run_child(mode: &str, port: u16, env: Option<String>) {
    let mut cmd = jeprof_conformance::target_command(std::env::current_exe().unwrap());
    cmd.env("OTLP_PUSH_CHILD", mode)
        .env("OTLP_PUSH_PORT", port.to_string());
    match env {
        Some(v) => cmd.env("JEPROF_SHIM", v),
        None => cmd.env("JEPROF_SHIM", "sample_rate:4096"),
    };
    let out = cmd.output().unwrap();
    // What the child measured (the request's sizes), for a person reading the run.
    print!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "child {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    if let Ok(mode) = std::env::var("OTLP_PUSH_CHILD") {
        client::watchdog(Duration::from_secs(120), "otlp_push child");
        let port: u16 = std::env::var("OTLP_PUSH_PORT").unwrap().parse().unwrap();
        match mode.as_str() {
            "receives" => child_receives(port, false),
            "receives_gzip" => child_receives(port, true),
            "dead" => child_dead_collector(),
            "silent" => child_silent_collector(),
            _ => panic!("unknown mode {mode}"),
        }
        return;
    }
    client::watchdog(Duration::from_secs(300), "otlp_push");
    let port = jeprof_conformance::free_port();
    run_child(
        "receives",
        port,
        Some(format!(
            "sample_rate:4096,service:checkout,otlp_push:http://127.0.0.1:{port}/base/,\
             otlp_interval:0.2"
        )),
    );
    println!("push_is_a_post_of_the_process_profile_to_the_profiles_path: ok");
    let port = jeprof_conformance::free_port();
    run_child(
        "receives_gzip",
        port,
        Some(format!(
            "sample_rate:4096,service:checkout,otlp_push:http://127.0.0.1:{port}/base/,\
             otlp_interval:0.2,otlp_compression:gzip"
        )),
    );
    println!("gzip_push_is_what_pyroscope_and_the_collector_read: ok");
    run_child("dead", 0, None);
    println!("dead_collector_leaves_the_program_running_with_bounded_attempts: ok");
    run_child("silent", 0, None);
    println!("silent_collector_times_out_and_never_blocks_the_program: ok");
    println!("4 passed, 0 failed");
}
