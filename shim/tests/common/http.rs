//! A client for the listener's tests: requests written byte for byte (so malformed ones can be
//! sent too), the answer read to the end.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response as received: status, headers (lower-case names) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends `raw` as is and reads the answer until the server closes the connection.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(raw)?;
    let mut all = Vec::new();
    stream.read_to_end(&mut all)?;
    parse(&all).ok_or_else(|| {
        std::io::Error::other(format!(
            "not an HTTP response: {:?}",
            String::from_utf8_lossy(&all[..all.len().min(200)])
        ))
    })
}

/// `GET target`.
pub fn get(addr: SocketAddr, target: &str) -> std::io::Result<Answer> {
    exchange(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    )
}

/// `POST target` with `body`.
pub fn post(addr: SocketAddr, target: &str, body: &[u8]) -> std::io::Result<Answer> {
    let mut raw = format!(
        "POST {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    exchange(addr, &raw)
}

fn parse(all: &[u8]) -> Option<Answer> {
    let end = all.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&all[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Answer {
        status,
        headers,
        body: all[end + 4..].to_vec(),
    })
}

/// Aborts the process if it is still running after `limit`: a hang fails the test instead of
/// stalling CI.
pub fn watchdog(limit: Duration, what: &'static str) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("watchdog: {what} still running after {limit:?}; failing");
        std::process::exit(101);
    });
}
