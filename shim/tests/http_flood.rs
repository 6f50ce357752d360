//! The listener under a connection flood: with 300 connections left silent and 50 trickling a
//! request head one byte every 500 ms, all held open by the listener, a request is answered within
//! 2 s, several times in a row, and the silent and trickling connections are answered 408 when
//! their time to send a request is up; at the connection cap, a new connection closes the oldest
//! one held and is answered. Bounded in time by a watchdog.

#[path = "common/http.rs"]
mod client;

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use jeprof_shim::http;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// Connections opened and left silent (a scraper's idle keep-alive pool).
const SILENT: usize = 300;
/// Connections sending a request head one byte every [`TRICKLE_EVERY`].
const TRICKLING: usize = 50;
const TRICKLE_EVERY: Duration = Duration::from_millis(500);
/// Requests made while the flood is held.
const REQUESTS: usize = 5;
/// The time a request may take under the flood (the goal the listener was built for).
const ANSWERED_WITHIN: Duration = Duration::from_secs(2);

/// Raises `RLIMIT_NOFILE`'s soft limit to `wanted` (or the hard limit, if lower): the listener's
/// connection cap is a quarter of it, and both ends of every connection are in this process.
fn raise_descriptor_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through the pointer, which points to one.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(read, 0, "getrlimit: {}", std::io::Error::last_os_error());
    if limit.rlim_cur < wanted {
        limit.rlim_cur = wanted.min(limit.rlim_max);
        // SAFETY: setrlimit reads one `rlimit` through the pointer, which points to one.
        let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        assert_eq!(set, 0, "setrlimit: {}", std::io::Error::last_os_error());
    }
}

/// The connections the listener holds: this process's descriptors that are established TCP
/// sockets whose local port is the listener's (the clients' ends have it as their remote port;
/// a connection answered and shut is no longer established).
fn held_by_listener(port: u16) -> usize {
    let ours: HashSet<u64> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|link| {
            link.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|line| {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            let inode = fields[9].parse::<u64>().ok();
            local_port == Some(port)
                && fields[3] == "01"
                && inode.is_some_and(|i| ours.contains(&i))
        })
        .count()
}

/// Waits (under the watchdog) until the listener holds `n` connections.
fn wait_until_held(port: u16, n: usize) {
    while held_by_listener(port) != n {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether nothing has come from the server on `s`, neither an answer nor its closing.
fn nothing_received(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let peeked = s.peek(&mut [0u8; 1]);
    s.set_nonblocking(false).unwrap();
    matches!(peeked, Err(e) if e.kind() == ErrorKind::WouldBlock)
}

/// What the server sends on `s` until it closes it (the 60 s timeout only keeps a hang short).
fn answer_on(mut s: TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    String::from_utf8_lossy(&all).into_owned()
}

/// Sends each connection's request head one byte every [`TRICKLE_EVERY`] until the server sends
/// something or closes it; what each connection received.
fn trickle(streams: Vec<TcpStream>) -> Vec<String> {
    let head = b"GET /pprof/cmdline HTTP/1.1\r\nHost: trickle\r\nUser-Agent: slow\r\n\r\n";
    let mut received = vec![Vec::new(); streams.len()];
    let mut closed = vec![false; streams.len()];
    let mut sent = vec![0; streams.len()];
    let mut next_byte = Instant::now();
    for s in &streams {
        s.set_nonblocking(true).unwrap();
    }
    while closed.iter().any(|c| !c) {
        for (i, mut s) in streams.iter().enumerate() {
            let mut chunk = [0u8; 512];
            while !closed[i] {
                match s.read(&mut chunk) {
                    Ok(0) => closed[i] = true,
                    Ok(n) => received[i].extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("trickling connection {i}: {e}"),
                }
            }
        }
        if Instant::now() >= next_byte {
            next_byte += TRICKLE_EVERY;
            for (i, mut s) in streams.iter().enumerate() {
                // Stop once answered: a byte sent after the server closed would reset the
                // connection.
                if received[i].is_empty() && !closed[i] && sent[i] < head.len() {
                    s.write_all(&head[sent[i]..sent[i] + 1]).unwrap();
                    sent[i] += 1;
                }
            }
        }
        // Reading often, so that no byte is sent long after an answer arrived.
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        sent.iter().all(|&n| n < head.len()),
        "a trickled head was complete before its deadline: the test proves nothing"
    );
    received
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r).into_owned())
        .collect()
}

fn requests_are_answered_within_2s_while_idle_and_trickling_connections_are_held(addr: SocketAddr) {
    // Names the profile's frames once, as a service that is scraped has them.
    assert_eq!(client::get(addr, "/debug/pprof/heap").unwrap().status, 200);
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let trickling: Vec<TcpStream> = (0..TRICKLING)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let trickler = std::thread::spawn(move || trickle(trickling));
    wait_until_held(addr.port(), SILENT + TRICKLING);
    for i in 0..REQUESTS {
        let held = held_by_listener(addr.port());
        assert_eq!(
            held,
            SILENT + TRICKLING,
            "request {i}: the flood is no longer held (its deadline passed?)"
        );
        let start = Instant::now();
        let answer = client::get(addr, "/debug/pprof/heap").unwrap();
        let took = start.elapsed();
        assert_eq!(answer.status, 200, "{}", answer.text());
        jeprof_shim::jeprof_dumpfmt::pprof::read_gz(&answer.body).expect("a pprof profile");
        println!(
            "request {i}, with {held} connections held idle or trickling: answered in {took:?}"
        );
        assert!(
            took < ANSWERED_WITHIN,
            "request {i} took {took:?} under the flood"
        );
        std::thread::sleep(TRICKLE_EVERY);
    }
    let refused = |answer: &str, what: &str| {
        assert!(
            answer.starts_with("HTTP/1.1 408 ")
                && answer.contains(&format!(
                    "the request was not received within {:?}",
                    http::READ_DEADLINE
                )),
            "{what}: {answer:?}"
        );
    };
    for (i, s) in silent.into_iter().enumerate() {
        refused(&answer_on(s), &format!("silent connection {i}"));
    }
    for (i, answer) in trickler.join().unwrap().iter().enumerate() {
        refused(answer, &format!("trickling connection {i}"));
    }
    println!("{SILENT} silent and {TRICKLING} trickling connections answered 408 and closed");
}

fn a_connection_at_the_cap_closes_the_oldest_held_and_is_answered(addr: SocketAddr, cap: usize) {
    wait_until_held(addr.port(), 0);
    let idle: Vec<TcpStream> = (0..cap)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    wait_until_held(addr.port(), cap);
    let start = Instant::now();
    let answer = client::get(addr, "/pprof/cmdline").unwrap();
    let took = start.elapsed();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(took < ANSWERED_WITHIN, "took {took:?} at the cap");
    // The oldest was closed without an answer (its deadline would have answered 408); the next
    // oldest is still held, and so is every other.
    let mut idle = idle.into_iter();
    assert_eq!(answer_on(idle.next().unwrap()), "");
    let idle: Vec<TcpStream> = idle.collect();
    assert!(
        nothing_received(&idle[0]),
        "the second oldest was closed too"
    );
    assert_eq!(held_by_listener(addr.port()), cap - 1);
    println!("at the cap of {cap} connections: the oldest closed, a request answered in {took:?}");
}

fn main() {
    client::watchdog(Duration::from_secs(180), "http_flood");
    raise_descriptor_limit(4096);
    let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let cap = server.max_connections();
    assert!(
        cap > SILENT + TRICKLING + REQUESTS,
        "the listener holds at most {cap} connections (RLIMIT_NOFILE's hard limit is too low): \
         the flood would not be held, so the test cannot run"
    );
    requests_are_answered_within_2s_while_idle_and_trickling_connections_are_held(addr);
    a_connection_at_the_cap_closes_the_oldest_held_and_is_answered(addr, cap);
    server.shutdown();
    println!("ok");
}
