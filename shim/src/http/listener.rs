//! The standalone listener: one accepting thread and a fixed pool of workers, all inside the
//! profiler's re-entrancy guard for their whole life (nothing they allocate is sampled), reading
//! requests with `httparse` and writing `Connection: close` responses. Bounded: [`WORKERS`]
//! threads, a queue of [`QUEUE`] accepted connections (beyond it a connection gets 503 at once),
//! a request head of at most [`MAX_HEAD`] bytes read within [`READ_DEADLINE`], a body of at most
//! [`super::MAX_SYMBOL_BODY`] bytes. A client that goes away mid-response costs its worker one
//! failed write.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::handlers::{handle, Request, Response, MAX_SYMBOL_BODY};
use crate::base::sync::lock;
use crate::base::thread::Guard;

/// Worker threads: requests served at once.
pub const WORKERS: usize = 4;
/// Accepted connections waiting for a worker; one more gets 503 at once.
pub const QUEUE: usize = 128;
/// The largest request head (request line and headers) read.
pub const MAX_HEAD: usize = 16 << 10;
/// The time a client has to send its request head and body.
pub const READ_DEADLINE: Duration = Duration::from_secs(10);
/// The time a response may take to write (a client that reads nothing is dropped after it).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running listener ([`serve`]). Dropping it leaves it serving; [`Server::shutdown`] stops it.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
}

impl Server {
    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting; requests already accepted are still answered.
    pub fn shutdown(self) {
        // Ordering: Relaxed suffices; the accepting thread reads the flag after the connect
        // below wakes it, and the flag publishes nothing else.
        self.stopping.store(true, Ordering::Relaxed);
        // Wake the accepting thread, blocked in accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// Serves the endpoints ([`super::handle`]) on `addr`, from threads of its own, until
/// [`Server::shutdown`]. Bind to loopback (`127.0.0.1:6060`): the profiles reveal code addresses
/// and the memory map. Returns once the socket listens.
pub fn serve(addr: impl ToSocketAddrs) -> io::Result<Server> {
    let _guard = Guard::enter();
    crate::profiler::init::ensure_init();
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    let stopping = Arc::new(AtomicBool::new(false));
    let (queue, waiting) = mpsc::sync_channel::<TcpStream>(QUEUE);
    let waiting = Arc::new(Mutex::new(waiting));
    for i in 0..WORKERS {
        let waiting = Arc::clone(&waiting);
        std::thread::Builder::new()
            .name(format!("jeprof-http-{i}"))
            .spawn(move || worker(&waiting))?;
    }
    let flag = Arc::clone(&stopping);
    std::thread::Builder::new()
        .name("jeprof-http".into())
        .spawn(move || accept(&listener, &queue, &flag))?;
    Ok(Server { addr, stopping })
}

/// The accepting thread: hands connections to the workers, or answers 503 when the queue is full.
fn accept(listener: &TcpListener, queue: &SyncSender<TcpStream>, stopping: &AtomicBool) {
    let _guard = Guard::enter();
    for stream in listener.incoming() {
        // Ordering: see `Server::shutdown`.
        if stopping.load(Ordering::Relaxed) {
            return;
        }
        let Ok(stream) = stream else {
            // Out of file descriptors and the like: wait instead of spinning.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        match queue.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(mut stream)) => {
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let busy = Response::error(
                    503,
                    format_args!("{QUEUE} requests are already waiting; retry later"),
                );
                write_response(&mut stream, &busy, false);
            }
            Err(TrySendError::Disconnected(_)) => return,
        }
    }
}

/// A worker: serves queued connections, one request each, until the accepting thread is gone.
fn worker(waiting: &Mutex<Receiver<TcpStream>>) {
    let _guard = Guard::enter();
    loop {
        let next = lock(waiting).recv();
        let Ok(mut stream) = next else { return };
        serve_connection(&mut stream);
    }
}

/// Reads one request from `stream`, answers it and closes the connection.
fn serve_connection(stream: &mut TcpStream) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let deadline = Instant::now() + READ_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let (head_len, method, target, body_len, expects_continue) = loop {
        if let Err(e) = read_some(stream, &mut buf, MAX_HEAD, deadline) {
            if let Some(response) = e {
                write_response(stream, &response, false);
            }
            return;
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(n)) => match head_fields(&parsed) {
                Ok((body_len, expects_continue)) => {
                    break (
                        n,
                        parsed.method.unwrap_or("").to_string(),
                        parsed.path.unwrap_or("").to_string(),
                        body_len,
                        expects_continue,
                    )
                }
                Err(response) => return write_response(stream, &response, false),
            },
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                let response = Response::error(
                    431,
                    format_args!("the request head is longer than {MAX_HEAD} bytes"),
                );
                return write_response(stream, &response, false);
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => {
                let response = Response::error(400, format_args!("malformed request: {e}"));
                return write_response(stream, &response, false);
            }
        }
    };
    if body_len > MAX_SYMBOL_BODY {
        let response = Response::error(
            413,
            format_args!("the body has {body_len} bytes; at most {MAX_SYMBOL_BODY}"),
        );
        write_response(stream, &response, false);
        // Read (a bounded part of) what the client still sends, so closing does not reset the
        // connection before it reads the answer.
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let _ = io::copy(
            &mut (&*stream).take(4 * MAX_SYMBOL_BODY as u64),
            &mut io::sink(),
        );
        return;
    }
    if expects_continue && body_len > buf.len() - head_len {
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    while buf.len() < head_len + body_len {
        if let Err(e) = read_some(stream, &mut buf, head_len + body_len, deadline) {
            if let Some(response) = e {
                write_response(stream, &response, false);
            }
            return;
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let request = Request {
        method: &method,
        path,
        query,
        body: &buf[head_len..head_len + body_len],
    };
    let response = handle(&request);
    write_response(stream, &response, method == "HEAD");
}

/// The body's length and whether the client waits for `100 Continue`; a chunked body is refused.
fn head_fields(parsed: &httparse::Request<'_, '_>) -> Result<(usize, bool), Response> {
    let mut body_len = 0usize;
    let mut expects_continue = false;
    for h in parsed.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            body_len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| Response::error(400, "Content-Length is not a number"))?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Response::error(
                411,
                "chunked bodies are not accepted: send Content-Length",
            ));
        } else if h.name.eq_ignore_ascii_case("expect") {
            expects_continue = h.value.eq_ignore_ascii_case(b"100-continue");
        }
    }
    Ok((body_len, expects_continue))
}

/// Reads more of the request into `buf` (up to `limit` bytes in all) before `deadline`. `Err`
/// when the connection is done: with a response to send (408 on the deadline), or `None` when the
/// client closed it or it failed.
fn read_some(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    limit: usize,
    deadline: Instant,
) -> Result<(), Option<Response>> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Some(Response::error(
            408,
            format_args!("the request was not received within {READ_DEADLINE:?}"),
        )));
    }
    let _ = stream.set_read_timeout(Some(left));
    let start = buf.len();
    let want = (limit - start).clamp(1, 64 << 10);
    buf.resize(start + want, 0);
    let n = stream.read(&mut buf[start..]);
    match n {
        Ok(0) => {
            buf.truncate(start);
            Err(None)
        }
        Ok(n) => {
            buf.truncate(start + n);
            Ok(())
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            buf.truncate(start);
            Err(Some(Response::error(
                408,
                format_args!("the request was not received within {READ_DEADLINE:?}"),
            )))
        }
        Err(_) => Err(None),
    }
}

/// Writes `response` and closes the sending side; a client that went away is not an error.
fn write_response(stream: &mut TcpStream, response: &Response, head_only: bool) {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| {
            if head_only {
                Ok(())
            } else {
                stream.write_all(&response.body)
            }
        })
        .and_then(|()| stream.flush());
    let _ = stream.shutdown(Shutdown::Write);
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// The address the `http` setting's listener was started on, so it starts once. Only locked while
/// `settings::HTTP_ADDR` is held, which the fork handlers hold: a child never inherits it locked.
static STARTED: Mutex<Option<String>> = Mutex::new(None);

/// Starts the listener the `http` setting asks for, if it is not running yet; a failure to bind is
/// said on stderr. Call only outside an allocation (it spawns threads) and after initialisation
/// (which takes the setting's lock, held here).
pub(crate) fn start_configured() {
    let _guard = Guard::enter();
    let wanted = lock(&crate::base::settings::HTTP_ADDR);
    let Some(addr) = wanted.as_deref() else {
        return;
    };
    let mut started = lock(&STARTED);
    if started.as_deref() == Some(addr) {
        return;
    }
    match serve(addr) {
        Ok(_) => *started = Some(addr.to_string()),
        Err(e) => eprintln!("jeprof-shim: cannot serve HTTP on {addr}: {e}"),
    }
}

/// Before `main`, when `JEPROF_SHIM` names an `http` address: reads the settings and starts the
/// listener, which must not be started inside the allocation that would otherwise read the
/// environment first.
extern "C" fn start_listener_if_the_environment_asks() {
    // SAFETY: the name is a NUL-terminated C string; getenv returns NULL or a pointer into the
    // environment, valid while nothing calls setenv (nothing else runs this early).
    let raw = unsafe { libc::getenv(c"JEPROF_SHIM".as_ptr()) };
    if raw.is_null() {
        return;
    }
    // SAFETY: non-null getenv results are NUL-terminated strings.
    let value = unsafe { std::ffi::CStr::from_ptr(raw) }.to_bytes();
    if value.windows(5).any(|w| w == b"http:") {
        crate::profiler::init::ensure_init();
        start_configured();
    }
}

/// Runs [`start_listener_if_the_environment_asks`] as an ELF constructor.
#[used]
#[link_section = ".init_array"]
static START_LISTENER_BEFORE_MAIN: extern "C" fn() = start_listener_if_the_environment_asks;
