//! The HTTP endpoints' request and response, their limits, and the listener's handle.

use std::net::SocketAddr;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use mio::Waker;

/// The longest `?seconds=` window a request may ask for (Go's handler has no cap of its own; a
/// bounded wait keeps a worker from being held indefinitely).
pub const MAX_WINDOW_SECONDS: u64 = 300;

/// The largest `/pprof/symbol` body accepted (a bigger one gets 413): a million bytes hold about
/// 60,000 addresses, more than a heap profile's distinct frames.
pub const MAX_SYMBOL_BODY: usize = 1 << 20;

/// At most this many `?seconds=` requests wait at once (more get 503), so windows never hold every
/// worker of the listener.
pub const MAX_CONCURRENT_WINDOWS: usize = 2;

/// The paths [`handle`](crate::http::handle) serves.
pub const PATHS: [&str; 11] = [
    "/",
    "/debug/pprof/heap",
    "/debug/pprof/allocs",
    "/debug/pprof/peak",
    "/debug/pprof/rss",
    "/debug/pprof/allocator",
    "/debug/pprof/leaks",
    "/debug/pprof/symbol",
    "/pprof/heap",
    "/pprof/symbol",
    "/pprof/cmdline",
];

/// An HTTP request as the handlers need it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `POST`, ... (case-sensitive, as HTTP says).
    pub method: &'a str,
    /// The path, without the query (`/debug/pprof/heap`).
    pub path: &'a str,
    /// The query string without its `?` (`seconds=10&gc=1`), empty when none.
    pub query: &'a str,
    /// The body (only `POST /pprof/symbol` reads it).
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

/// An HTTP response: status, content type and body. Errors are 4xx/5xx with a one-line
/// `text/plain` reason.
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

/// Worker threads: requests served at once.
pub const WORKERS: usize = 4;

/// Complete requests waiting for a worker; one more gets 503 at once.
pub const QUEUE: usize = 128;

/// The largest request head (request line and headers) read.
pub const MAX_HEAD: usize = 16 << 10;

/// The time a client has, from connecting, to send its request head and body.
pub const READ_DEADLINE: Duration = Duration::from_secs(10);

/// The most connections the event loop holds, whatever the descriptor limit
/// ([`Server::max_connections`] says how many a listener holds).
pub const MAX_CONNECTIONS: usize = 512;

/// The longest [`Server::shutdown`] waits for the event loop to close its sockets (it returns
/// within one turn of the loop, milliseconds, unless the machine is starved).
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The time a worker has to write a response.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(30);

/// A running listener ([`serve`](crate::http::serve)). Dropping it leaves it serving; [`Server::shutdown`] stops it.
#[derive(Debug)]
pub struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) max_connections: usize,
    pub(crate) waker: Waker,
    /// Disconnected when the event loop has returned and closed its sockets (nothing is sent).
    pub(crate) stopped: Receiver<()>,
    /// The process that started the loop: a forked child has no loop thread to wait for.
    pub(crate) pid: u32,
}

impl Server {
    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The most connections its event loop holds before closing the oldest to admit a new one:
    /// a quarter of `RLIMIT_NOFILE`'s soft limit (when [`serve`](crate::http::serve) ran) less the [`QUEUE`] +
    /// [`WORKERS`] connections past the loop and its 3 own descriptors, between 16 and
    /// [`MAX_CONNECTIONS`].
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Stops accepting and closes the connections still sending their requests; requests already
    /// received are still answered. Returns once the listening socket is closed, so a connection
    /// made afterwards is refused (waiting at most [`SHUTDOWN_WAIT`]; not at all in a forked
    /// child, which has no loop thread).
    pub fn shutdown(self) {
        let _ = self.waker.wake();
        if std::process::id() == self.pid {
            // Err(Disconnected) when the loop has returned, Err(Timeout) after the bound.
            let _ = self.stopped.recv_timeout(SHUTDOWN_WAIT);
        }
    }
}
