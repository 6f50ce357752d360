//! The HTTP endpoints, off Linux (feature `http`): there is no profile to serve, so [`serve`]
//! fails and [`handle`] answers 501 with the reason. The types and limits are Linux's.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::unsupported;

/// Longest `seconds=N` window.
pub const MAX_WINDOW_SECONDS: u64 = 300;
/// Largest `/pprof/symbol` body.
pub const MAX_SYMBOL_BODY: usize = 1 << 20;
/// `seconds` requests that may wait at once.
pub const MAX_CONCURRENT_WINDOWS: usize = 2;
/// The paths served (on Linux).
pub const PATHS: [&str; 9] = [
    "/",
    "/debug/pprof/heap",
    "/debug/pprof/allocs",
    "/debug/pprof/peak",
    "/debug/pprof/allocator",
    "/debug/pprof/leaks",
    "/pprof/heap",
    "/pprof/symbol",
    "/pprof/cmdline",
];
/// Worker threads.
pub const WORKERS: usize = 4;
/// Requests queued for the workers.
pub const QUEUE: usize = 128;
/// Largest request head.
pub const MAX_HEAD: usize = 16 << 10;
/// Time a client has to send its request head.
pub const READ_DEADLINE: Duration = Duration::from_secs(10);
/// Most connections the event loop holds.
pub const MAX_CONNECTIONS: usize = 512;
/// Longest wait of [`Server::shutdown`].
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Time a client has to read its response.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(30);

/// An HTTP request as the handlers need it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query string without its `?`, empty when none.
    pub query: &'a str,
    /// The body.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A request for `target` (a path with an optional `?query`), with no body.
    pub fn get(target: &'a str) -> Request<'a> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: "GET",
            path,
            query,
            body: &[],
        }
    }
}

/// An HTTP response: status, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header's value.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// An error with a one-line reason.
    pub fn error(status: u16, reason: impl std::fmt::Display) -> Response {
        let mut line = reason.to_string().replace(['\r', '\n'], " ");
        line.push('\n');
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: line.into_bytes(),
        }
    }
}

/// 501 Not Implemented, with the reason, for every request.
pub fn handle(_request: &Request<'_>) -> Response {
    Response::error(501, unsupported("http::handle"))
}

/// A running listener: never one here ([`serve`] fails), so no value of this type exists.
#[derive(Debug)]
pub struct Server {
    never: std::convert::Infallible,
}

impl Server {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        match self.never {}
    }

    /// The most connections its event loop holds.
    pub fn max_connections(&self) -> usize {
        match self.never {}
    }

    /// Stops it.
    pub fn shutdown(self) {
        match self.never {}
    }
}

/// Fails with [`io::ErrorKind::Unsupported`]: there is no profile to serve here.
pub fn serve(_addr: impl ToSocketAddrs) -> io::Result<Server> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        unsupported("serve"),
    ))
}

/// The `http:<addr>` setting is refused with the others ([`crate::configure`]): nothing to start.
pub(crate) fn listener_for_settings() {}
