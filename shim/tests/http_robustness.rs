//! The listener under bad and hostile clients: every bad request gets its 4xx and a one-line
//! reason; 100 concurrent clients are all answered by the same few threads; clients that
//! disconnect mid-response, send nothing, or trickle a head leave it serving; and nothing the
//! listener allocates is sampled; the peak and text forms are served. Bounded in time by a watchdog.

#[path = "common/http.rs"]
mod client;
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use jeprof_shim::http;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Checks a refusal: the status, and a body of exactly one line containing `why`.
fn refused(answer: std::io::Result<client::Answer>, status: u16, why: &str, what: &str) {
    let answer = answer.unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = answer.text();
    assert_eq!(answer.status, status, "{what}: {text}");
    assert!(
        text.ends_with('\n') && text.matches('\n').count() == 1,
        "{what}: not one line: {text:?}"
    );
    assert!(text.contains(why), "{what}: {text:?} does not say {why:?}");
    println!("{what}: {status} {}", text.trim_end());
}

fn bad_requests_get_their_4xx(addr: SocketAddr) {
    refused(
        client::get(addr, "/debug/pprof/nope"),
        404,
        "unknown path",
        "unknown path",
    );
    refused(
        client::get(addr, "/debug"),
        404,
        "/debug/pprof/heap",
        "a path beside the page",
    );
    refused(
        client::post(addr, "/debug/pprof/heap", b""),
        405,
        "does not serve POST",
        "POST to heap",
    );
    for (query, why) in [
        (
            "seconds=abc",
            "`seconds=abc`: expected a non-negative integer",
        ),
        ("seconds=0", "expected 1 to 300"),
        ("seconds=301", "expected 1 to 300"),
        ("debug=-1", "`debug=-1`"),
        ("gc=x", "`gc=x`"),
    ] {
        refused(
            client::get(addr, &format!("/debug/pprof/allocs?{query}")),
            400,
            why,
            query,
        );
    }
    refused(
        client::get(addr, "/debug/pprof/peak?seconds=2"),
        400,
        "peak",
        "peak with seconds",
    );
    refused(
        client::post(addr, "/pprof/symbol", b"0x10+0xzz"),
        400,
        "`0xzz` is not a hexadecimal address",
        "bad address",
    );
    let big = vec![b'0'; http::MAX_SYMBOL_BODY + 1];
    refused(
        client::post(addr, "/pprof/symbol", &big),
        413,
        "at most 1048576",
        "oversized symbol body",
    );
    refused(
        client::exchange(
            addr,
            b"POST /pprof/symbol HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n0x10\r\n0\r\n\r\n",
        ),
        411,
        "Content-Length",
        "chunked body",
    );
    refused(
        client::exchange(addr, b"NOT HTTP AT ALL\r\n\r\n"),
        400,
        "malformed request",
        "garbage",
    );
    let mut long = b"GET /pprof/cmdline HTTP/1.1\r\nX-Padding: ".to_vec();
    long.resize(http::MAX_HEAD + 100, b'a');
    refused(
        client::exchange(addr, &long),
        431,
        "longer than 16384",
        "long head",
    );
}

/// Symbols for a function of this test, as jeprof asks for them.
fn symbol_page_names_addresses(addr: SocketAddr) {
    let check = client::get(addr, "/pprof/symbol").unwrap();
    assert_eq!(
        (check.status, check.text().as_str()),
        (200, "num_symbols: 1\n")
    );
    let inside = symbol_page_names_addresses as fn(SocketAddr) as usize as u64 + 4;
    let answer = client::post(
        addr,
        "/pprof/symbol",
        format!("0x{inside:x}+0x1").as_bytes(),
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    let text = answer.text();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("0x{inside:016x}\t")))
        .unwrap_or_else(|| panic!("0x{inside:x} not answered: {text:?}"));
    assert!(
        line.ends_with("http_robustness::symbol_page_names_addresses"),
        "{line}"
    );
    // curl, as jeprof posts: `curl -s -d @file URL`.
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("pcs");
    std::fs::write(&body, format!("0x{inside:x}")).unwrap();
    let out = std::process::Command::new("curl")
        .args(["-s", "--fail", "-d"])
        .arg(format!("@{}", body.display()))
        .arg(format!("http://{addr}/pprof/symbol"))
        .output()
        .expect("curl runs");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{line}\n"));
}

/// `/debug/pprof/peak` is pprof with the peak's samples; `debug=1` answers heap_v2 text.
fn peak_and_text_forms_are_served(addr: SocketAddr) {
    let peak = client::get(addr, "/debug/pprof/peak").unwrap();
    assert_eq!(peak.status, 200);
    let pb = jeprof_shim::jeprof_dumpfmt::pprof::read_gz(&peak.body).expect("peak is pprof");
    let inuse_bytes: i64 = pb.sample.iter().map(|s| s.value[1]).sum();
    let peak_estimate = jeprof_shim::stats().peak_bytes_estimate as f64;
    assert!(inuse_bytes > 0, "no live bytes in the peak profile");
    assert!(
        (inuse_bytes as f64 - peak_estimate).abs() <= 0.01 * peak_estimate + pb.sample.len() as f64,
        "peak profile {inuse_bytes} B, stats() says the peak is {peak_estimate} B"
    );
    for target in ["/debug/pprof/heap?debug=1", "/debug/pprof/peak?debug=2"] {
        let text = client::get(addr, target).unwrap();
        assert_eq!(text.status, 200);
        assert!(text.text().contains("heap_v2/"), "{target}: not heap_v2");
        assert!(
            text.text().contains("--- symbol"),
            "{target}: not symbolized"
        );
    }
}

/// The threads of this process named like the listener's (`comm` keeps 15 bytes of a name).
fn listener_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("jeprof-http"))
        .count()
}

fn hundred_concurrent_clients_are_all_answered(addr: SocketAddr) {
    let threads_before = listener_threads();
    assert_eq!(threads_before, http::WORKERS + 1);
    let start = Instant::now();
    let clients: Vec<_> = (0..100)
        .map(|i| {
            std::thread::spawn(move || {
                let target = if i % 2 == 0 {
                    "/debug/pprof/heap"
                } else {
                    "/pprof/heap"
                };
                client::get(addr, target).map(|a| (a.status, a.body.len()))
            })
        })
        .collect();
    let mut most_threads = 0;
    while !clients.iter().all(|c| c.is_finished()) {
        most_threads = most_threads.max(listener_threads());
        std::thread::sleep(Duration::from_millis(5));
    }
    for c in clients {
        let (status, len) = c.join().unwrap().unwrap();
        assert_eq!(status, 200);
        assert!(len > 0);
    }
    println!(
        "100 concurrent clients answered in {:?} by {most_threads} listener threads",
        start.elapsed()
    );
    assert_eq!(most_threads, http::WORKERS + 1, "the listener grew threads");
}

fn disconnecting_and_silent_clients_leave_it_serving(addr: SocketAddr) {
    // Half-read responses: the client closes with the rest unread (the server's writes fail).
    for _ in 0..20 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /debug/pprof/heap?debug=1 HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut first = [0u8; 64];
        s.read_exact(&mut first).unwrap();
        assert!(first.starts_with(b"HTTP/1.1 200"));
    }
    // Connections that send nothing, or half a head and close.
    for _ in 0..20 {
        drop(TcpStream::connect(addr).unwrap());
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /debug/pprof/he").unwrap();
    }
    // A client trickling its head is held until the read deadline, then gets 408; the listener
    // keeps serving meanwhile: a request sent after it is answered while it is still held.
    // (No bound on seconds: the slow client's 60 s read timeout only keeps a hang from lasting.)
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /pprof/cmdline HTTP/1.1\r\n").unwrap();
        let mut all = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.read_to_end(&mut all).unwrap();
        String::from_utf8_lossy(&all).into_owned()
    });
    std::thread::sleep(Duration::from_millis(200));
    let ok = client::get(addr, "/pprof/cmdline").unwrap();
    assert_eq!(ok.status, 200);
    assert!(
        !slow.is_finished(),
        "the trickling client was answered before a later request (read deadline {:?})",
        http::READ_DEADLINE
    );
    let answer = slow.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let after = client::get(addr, "/debug/pprof/heap").unwrap();
    assert_eq!(after.status, 200);
}

/// With a small period, anything the listener allocated would be sampled and named
/// `jeprof_shim::http::…`; the clients' allocations (this test's threads) are, and are named.
fn serving_is_not_the_services_memory() {
    let profile = jeprof_shim::snapshot();
    let symbols = profile.symbols.as_ref().expect("symbolized");
    let named = |part: &str| {
        symbols
            .names
            .values()
            .flatten()
            .filter(|n| n.contains(part))
            .count()
    };
    assert!(
        named("http_robustness::") > 0,
        "the clients' own samples are missing"
    );
    assert_eq!(
        named("jeprof_shim::http::"),
        0,
        "the listener's allocations were sampled"
    );
}

fn main() {
    client::watchdog(Duration::from_secs(240), "http_robustness");
    // Every ~4 KiB allocated is a sample: the listener's work would show if it were sampled.
    jeprof_shim::set_sample_rate(4096);
    let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let live = common::run(10);
    bad_requests_get_their_4xx(addr);
    symbol_page_names_addresses(addr);
    peak_and_text_forms_are_served(addr);
    hundred_concurrent_clients_are_all_answered(addr);
    disconnecting_and_silent_clients_leave_it_serving(addr);
    serving_is_not_the_services_memory();
    drop(live);
    server.shutdown();
    assert!(
        client::get(addr, "/pprof/cmdline").is_err(),
        "still serving after shutdown"
    );
    println!("ok");
}
