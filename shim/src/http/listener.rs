//! The standalone listener: one event-loop thread that accepts connections and reads requests
//! without blocking, and [`WORKERS`] threads that run the handlers and write the responses, all
//! inside the profiler's re-entrancy guard for their whole life (nothing they allocate is sampled).
//! Requests are read with `httparse`; every response is `Connection: close`.
//!
//! **Why an event loop.** A thread that blocks reading a connection belongs to whoever opened it.
//! An accepting thread feeding blocking workers through a queue is held by 300 connections left
//! silent (a scraper's idle keep-alive pool does this): they fill the queue and hold every worker
//! until their read timeouts, and every other request gets 503 for over a minute. Here the loop
//! (mio, on epoll) holds a connection at the cost of its buffer until its request is complete;
//! only complete requests reach the workers, so a silent or trickling client holds no thread.
//!
//! **The limits, and what they bound.**
//! - *Connections.* The loop holds at most [`Server::max_connections`]: a quarter of the file
//!   descriptors the process may open (`RLIMIT_NOFILE`'s soft limit when [`serve`] runs) less the
//!   [`QUEUE`] + [`WORKERS`] connections past the loop and its 3 own descriptors (listening
//!   socket, epoll, wake-up event), between 16 and [`MAX_CONNECTIONS`]. So, from a soft limit of
//!   604 up, the listener never holds more than a quarter of the service's descriptors (121
//!   connections under the common soft limit of 1,024; 512 from a soft limit of 2,588). When a
//!   connection arrives at the cap, the oldest the loop holds (still sending its request, or being
//!   refused) is closed without an answer to admit it. A client that sends its request as soon as
//!   it connects is answered unless `max_connections` other connections arrive after it and before
//!   its request (one turn of the loop), so idle connections cannot keep the listener from serving,
//!   however many there are.
//! - *Time to send a request.* Head and body must arrive within [`READ_DEADLINE`] of the connection
//!   (408 after), however regularly a client trickles its bytes.
//! - *Sizes.* A head of at most [`MAX_HEAD`] bytes (431); a body of at most
//!   [`super::MAX_SYMBOL_BODY`] (413; chunked bodies get 411), and at most
//!   [`WORKERS`] × [`super::MAX_SYMBOL_BODY`] = 4 MiB of bodies held at once, read or waiting (503
//!   beyond).
//! - *Waiting requests.* At most [`QUEUE`] complete requests wait for a worker (503 beyond).
//! - *Writing.* A response has [`WRITE_DEADLINE`] to be written: a client that reads nothing holds
//!   a worker that long at most, and only once its response exceeds the socket's send buffer. A
//!   client that goes away mid-response costs its worker one failed write.
//! - *Memory.* At most `max_connections` heads being read (16 KiB each: 8 MiB at 512), 4 MiB of
//!   bodies, [`QUEUE`] heads waiting (2 MiB), and the responses the [`WORKERS`] are writing.
//!
//! Refusals the loop writes itself (408, 413, 503, ...) have a second to go out; after one, what the
//! client still sends is read and dropped for half a second (4 MiB at most), so that closing does
//! not reset the connection before the client reads the answer.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};

use super::handlers::{handle, Request, Response, MAX_SYMBOL_BODY};
use crate::api::report::ListenerState;
use crate::base::sync::lock;
use crate::base::thread::Guard;
use crate::profiler::report::HTTP_LISTENER;

pub use crate::api::http::{
    Server, MAX_CONNECTIONS, MAX_HEAD, QUEUE, READ_DEADLINE, SHUTDOWN_WAIT, WORKERS, WRITE_DEADLINE,
};
/// The fewest connections the loop holds, whatever the descriptor limit.
const MIN_CONNECTIONS: usize = 16;
/// The time a refusal written by the loop has to go out.
const ANSWER_DEADLINE: Duration = Duration::from_secs(1);
/// After a refusal, how long and how much of what the client still sends is read and dropped.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 4 * MAX_SYMBOL_BODY;
/// Request bodies held at once, being read or waiting for a worker.
const BODY_BUDGET: usize = WORKERS * MAX_SYMBOL_BODY;
/// The most bytes one read takes from a connection.
const SCRATCH_BYTES: usize = 64 << 10;
/// Connections accepted per turn of the loop, so that a connection flood does not starve the
/// reading of those already accepted.
const ACCEPTS_PER_TURN: usize = 64;
/// The pause before accepting again when accepting fails for want of descriptors or memory.
const ACCEPT_PAUSE: Duration = Duration::from_millis(10);

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Connections get tokens from here on, in the order they are accepted, never reused (so the
/// smallest is the oldest, and a late event for a closed connection finds nothing).
const FIRST_CONNECTION: usize = 2;

/// Serves the endpoints ([`super::handle`]) on `addr`, from threads of its own, until
/// [`Server::shutdown`]. Bind to loopback (`127.0.0.1:6060`): the profiles reveal code addresses
/// and the memory map. Returns once the socket listens.
pub fn serve(addr: impl ToSocketAddrs) -> io::Result<Server> {
    let _guard = Guard::enter();
    crate::profiler::init::ensure_init();
    // The page and `/debug/pprof/leaks` read the leak history: it starts with its reader.
    crate::profiler::leak_history::ensure_recorder();
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let mut listener = mio::net::TcpListener::from_std(listener);
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    let max_connections = connection_cap(descriptor_limit());
    let (jobs, waiting) = mpsc::sync_channel::<Job>(QUEUE);
    let waiting = Arc::new(Mutex::new(waiting));
    for i in 0..WORKERS {
        let waiting = Arc::clone(&waiting);
        std::thread::Builder::new()
            .name(format!("jeprof-http-{i}"))
            .spawn(move || worker(&waiting))?;
    }
    let event_loop = EventLoop {
        poll,
        listener,
        connections: BTreeMap::new(),
        next_token: FIRST_CONNECTION,
        max_connections,
        jobs,
        bodies: Arc::new(AtomicUsize::new(0)),
        accept_at: None,
        // Not `vec![0u8; n]`: that would make the shim export `vec::from_elem::<u8>`, which
        // debug builds share with the program (share-generics) instead of inlining it there, and
        // a function whose last act is `vec![x; n]` then tail-calls it and vanishes from its
        // stacks (`tests/http_go_pprof.rs` names such a function).
        scratch: Box::new([0; SCRATCH_BYTES]),
    };
    let (done, stopped) = mpsc::sync_channel::<()>(0);
    std::thread::Builder::new()
        .name("jeprof-http".into())
        .spawn(move || {
            // `run` consumes the loop: its listener and connections are closed when it returns,
            // before `done` is dropped and `shutdown` returns.
            event_loop.run();
            drop(done);
        })?;
    Ok(Server {
        addr,
        max_connections,
        waker,
        stopped,
        pid: std::process::id(),
    })
}

/// `RLIMIT_NOFILE`'s soft limit (`None` when unlimited or unknown).
fn descriptor_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through the pointer, which points to one.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (read == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The connections the loop may hold under a soft descriptor limit of `soft`: a quarter of it,
/// less the connections past the loop (waiting or with a worker) and the loop's own descriptors,
/// between [`MIN_CONNECTIONS`] and [`MAX_CONNECTIONS`].
fn connection_cap(soft: Option<u64>) -> usize {
    let Some(soft) = soft else {
        return MAX_CONNECTIONS;
    };
    let quarter = usize::try_from(soft / 4).unwrap_or(usize::MAX);
    quarter
        .saturating_sub(QUEUE + WORKERS + 3)
        .clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

/// A complete request, handed to a worker with its connection (blocking from then on).
struct Job {
    stream: TcpStream,
    /// The head, then the body (`head.len + head.body_len` bytes).
    buf: Vec<u8>,
    head: Head,
}

/// A parsed request head.
struct Head {
    len: usize,
    method: String,
    target: String,
    body_len: usize,
    /// The body's share of [`BODY_BUDGET`], held until the request is answered.
    _body: Option<BodyReservation>,
}

/// Bytes of [`BODY_BUDGET`] taken by one request; given back on drop.
struct BodyReservation {
    taken: Arc<AtomicUsize>,
    bytes: usize,
}

impl BodyReservation {
    /// `bytes` of the budget, if that many are free.
    fn take(taken: &Arc<AtomicUsize>, bytes: usize) -> Option<BodyReservation> {
        // Ordering: a counter that publishes nothing; the update is one atomic step.
        taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                (held + bytes <= BODY_BUDGET).then_some(held + bytes)
            })
            .ok()
            .map(|_| BodyReservation {
                taken: Arc::clone(taken),
                bytes,
            })
    }
}

impl Drop for BodyReservation {
    fn drop(&mut self) {
        // Ordering: see `take`.
        self.taken.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A worker: answers the complete requests the loop hands over, until the loop is gone.
fn worker(waiting: &Mutex<Receiver<Job>>) {
    let _guard = Guard::enter();
    loop {
        let next = lock(waiting).recv();
        let Ok(job) = next else { return };
        answer(job);
    }
}

/// Runs the handler for `job` and writes its response within [`WRITE_DEADLINE`].
fn answer(job: Job) {
    let Job {
        mut stream,
        buf,
        head,
    } = job;
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let target = head.target.as_str();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let request = Request {
        method: &head.method,
        path,
        query,
        body: &buf[head.len..head.len + head.body_len],
    };
    let response = handle(&request);
    let deadline = Instant::now() + WRITE_DEADLINE;
    let head_only = head.method == "HEAD";
    let _ = write_before(&mut stream, response_head(&response).as_bytes(), deadline)
        .and_then(|()| {
            if head_only {
                Ok(())
            } else {
                write_before(&mut stream, &response.body, deadline)
            }
        })
        .and_then(|()| stream.flush());
    let _ = stream.shutdown(Shutdown::Write);
}

/// Writes all of `bytes` before `deadline` (a timeout error after it).
fn write_before(stream: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The status line and headers of `response`.
fn response_head(response: &Response) -> String {
    format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    )
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

/// The event loop's state: the listening socket and the connections it holds, keyed by token
/// (the smallest is the oldest).
struct EventLoop {
    poll: Poll,
    listener: mio::net::TcpListener,
    connections: BTreeMap<usize, Connection>,
    next_token: usize,
    max_connections: usize,
    jobs: SyncSender<Job>,
    /// Bytes of [`BODY_BUDGET`] taken.
    bodies: Arc<AtomicUsize>,
    /// When to accept again without waiting for the listener's next event: after a turn's quota
    /// of accepts (more may be waiting), or after a pause for want of descriptors.
    accept_at: Option<Instant>,
    /// Where reads land before they are copied to a connection's buffer (only what arrived is
    /// kept, so a silent connection holds no buffer).
    scratch: Box<[u8]>,
}

/// What a connection needs next.
enum Next {
    /// Nothing until its next event or deadline.
    Wait,
    /// Its request is complete: to a worker.
    Dispatch,
    /// Done: close it.
    Close,
}

/// A connection the loop holds.
struct Connection {
    stream: mio::net::TcpStream,
    /// When its current state runs out of time.
    deadline: Instant,
    state: State,
}

enum State {
    /// Receiving the request: `buf` holds what arrived, `head` once it is parsed.
    Reading { buf: Vec<u8>, head: Option<Head> },
    /// Writing a refusal of the loop's own (`sent` of `out`'s bytes written).
    Answering { out: Vec<u8>, sent: usize },
    /// The refusal sent and the sending side shut: dropping what the client still sends, at
    /// most `left` bytes more.
    Lingering { left: usize },
}

impl EventLoop {
    fn run(mut self) {
        let _guard = Guard::enter();
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = self
                .next_deadline()
                .map(|at| at.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    std::thread::sleep(ACCEPT_PAUSE);
                }
                continue;
            }
            for event in events.iter() {
                match event.token() {
                    // Only `Server::shutdown` wakes the loop.
                    WAKER => return,
                    LISTENER => self.accept_at = Some(Instant::now()),
                    Token(token) => self.ready(token),
                }
            }
            if self.accept_at.is_some_and(|at| at <= Instant::now()) {
                self.accept();
            }
            self.expire();
        }
    }

    /// The earliest time something is due: a connection's deadline, or accepting again.
    fn next_deadline(&self) -> Option<Instant> {
        let connections = self.connections.values().map(|c| c.deadline).min();
        match (connections, self.accept_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Accepts what is waiting (at most [`ACCEPTS_PER_TURN`]), closing the oldest connection for
    /// each one past the cap.
    fn accept(&mut self) {
        self.accept_at = None;
        for _ in 0..ACCEPTS_PER_TURN {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if self.connections.len() >= self.max_connections {
                        if let Some(&oldest) = self.connections.keys().next() {
                            self.close(oldest);
                        }
                    }
                    let token = self.next_token;
                    self.next_token += 1;
                    if self.register(&mut stream, token).is_ok() {
                        let connection = Connection {
                            stream,
                            deadline: Instant::now() + READ_DEADLINE,
                            state: State::Reading {
                                buf: Vec::new(),
                                head: None,
                            },
                        };
                        self.connections.insert(token, connection);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(_) => {
                    // Out of descriptors or memory: retrying at once would spin.
                    self.accept_at = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
            }
        }
        self.accept_at = Some(Instant::now());
    }

    /// Moves connection `token` on after an event.
    fn ready(&mut self, token: usize) {
        let Some(connection) = self.connections.get_mut(&token) else {
            return;
        };
        let next = connection.advance(&mut self.scratch, &self.bodies);
        self.follow(token, next);
    }

    fn follow(&mut self, token: usize, next: Next) {
        match next {
            Next::Wait => {}
            Next::Dispatch => self.dispatch(token),
            Next::Close => self.close(token),
        }
    }

    /// Refuses the requests not received in time and closes the connections whose refusal or
    /// lingering ran out of time.
    fn expire(&mut self) {
        let now = Instant::now();
        let due: Vec<usize> = self
            .connections
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(&token, _)| token)
            .collect();
        for token in due {
            let Some(connection) = self.connections.get_mut(&token) else {
                continue;
            };
            let next = match connection.state {
                State::Reading { .. } => connection.refuse(
                    &Response::error(
                        408,
                        format_args!("the request was not received within {READ_DEADLINE:?}"),
                    ),
                    &mut self.scratch,
                ),
                State::Answering { .. } | State::Lingering { .. } => Next::Close,
            };
            self.follow(token, next);
        }
    }

    /// Hands connection `token`'s complete request to the workers, or refuses it with 503 when
    /// [`QUEUE`] requests already wait.
    fn dispatch(&mut self, token: usize) {
        let Some(Connection {
            mut stream, state, ..
        }) = self.connections.remove(&token)
        else {
            return;
        };
        let State::Reading {
            mut buf,
            head: Some(head),
        } = state
        else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut stream);
        buf.truncate(head.len + head.body_len);
        let job = Job {
            stream: stream.into(),
            buf,
            head,
        };
        let job = match self.jobs.try_send(job) {
            Ok(()) => return,
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => job,
        };
        let Job { stream, buf, head } = job;
        // The body's bytes go back to the budget.
        drop((buf, head));
        let mut stream = mio::net::TcpStream::from_std(stream);
        if self.register(&mut stream, token).is_err() {
            return;
        }
        let busy = Response::error(
            503,
            format_args!("{QUEUE} requests are already waiting; retry later"),
        );
        let mut connection = Connection::refusing(stream, &busy);
        let next = connection.send(&mut self.scratch);
        self.connections.insert(token, connection);
        self.follow(token, next);
    }

    /// Registers a connection's events under `token`: readable, and writable too, so that a
    /// refusal that does not fit the send buffer continues when it drains (edge-triggered, so a
    /// reading connection pays one event for it).
    fn register(&self, stream: &mut mio::net::TcpStream, token: usize) -> io::Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        self.poll
            .registry()
            .register(stream, Token(token), interest)
    }

    fn close(&mut self, token: usize) {
        if let Some(mut connection) = self.connections.remove(&token) {
            // Explicitly: a forked child's copy of the descriptor would keep the registration
            // (and its events) alive past the close.
            let _ = self.poll.registry().deregister(&mut connection.stream);
        }
    }
}

impl Connection {
    /// A connection about to write `refusal`.
    fn refusing(stream: mio::net::TcpStream, refusal: &Response) -> Connection {
        Connection {
            stream,
            deadline: Instant::now() + ANSWER_DEADLINE,
            state: Connection::refusing_state(refusal),
        }
    }

    /// Reads, writes or drops what it can without blocking; what is needed next.
    fn advance(&mut self, scratch: &mut [u8], bodies: &Arc<AtomicUsize>) -> Next {
        if let State::Reading { buf, head } = &mut self.state {
            return match read_request(&mut self.stream, buf, head, scratch, bodies) {
                Ok(next) => next,
                Err(refusal) => self.refuse(&refusal, scratch),
            };
        }
        self.send(scratch)
    }

    /// Drops the request (its body's bytes go back to the budget) and starts writing `refusal`.
    fn refuse(&mut self, refusal: &Response, scratch: &mut [u8]) -> Next {
        self.state = Connection::refusing_state(refusal);
        self.deadline = Instant::now() + ANSWER_DEADLINE;
        self.send(scratch)
    }

    fn refusing_state(refusal: &Response) -> State {
        let mut out = response_head(refusal).into_bytes();
        out.extend_from_slice(&refusal.body);
        State::Answering { out, sent: 0 }
    }

    /// Writes the rest of a refusal, then drops what the client still sends.
    fn send(&mut self, scratch: &mut [u8]) -> Next {
        loop {
            match &mut self.state {
                State::Reading { .. } => return Next::Wait,
                State::Answering { out, sent } if *sent == out.len() => {
                    let _ = self.stream.shutdown(Shutdown::Write);
                    self.state = State::Lingering { left: LINGER_BYTES };
                    self.deadline = Instant::now() + LINGER;
                }
                State::Answering { out, sent } => match self.stream.write(&out[*sent..]) {
                    Ok(0) => return Next::Close,
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                },
                State::Lingering { left } => {
                    let room = (*left).min(scratch.len());
                    if room == 0 {
                        return Next::Close;
                    }
                    match self.stream.read(&mut scratch[..room]) {
                        Ok(0) => return Next::Close,
                        Ok(n) => *left -= n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return Next::Close,
                    }
                }
            }
        }
    }
}

/// Reads what has arrived of a request into `buf`, parsing the head once it is complete. `Err`
/// with the refusal when the request cannot be served.
fn read_request(
    stream: &mut mio::net::TcpStream,
    buf: &mut Vec<u8>,
    head: &mut Option<Head>,
    scratch: &mut [u8],
    bodies: &Arc<AtomicUsize>,
) -> Result<Next, Response> {
    loop {
        let limit = head.as_ref().map_or(MAX_HEAD, |h| h.len + h.body_len);
        if head.is_some() && buf.len() >= limit {
            return Ok(Next::Dispatch);
        }
        let room = (limit - buf.len()).min(scratch.len());
        match stream.read(&mut scratch[..room]) {
            Ok(0) => return Ok(Next::Close),
            Ok(n) => {
                // Grow by doubling, from 1 KiB, never past the limit: a head never holds more
                // than MAX_HEAD bytes of memory.
                let wanted = (buf.len() + n)
                    .max(2 * buf.capacity())
                    .max(1 << 10)
                    .min(limit);
                buf.reserve_exact(wanted - buf.len());
                buf.extend_from_slice(&scratch[..n]);
                if head.is_none() {
                    *head = parse_head(stream, buf, bodies)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Next::Wait),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(Next::Close),
        }
    }
}

/// The head in `buf`, once complete; takes the body's bytes from the budget, and says
/// `100 Continue` to a client that waits for it.
fn parse_head(
    stream: &mut mio::net::TcpStream,
    buf: &mut Vec<u8>,
    bodies: &Arc<AtomicUsize>,
) -> Result<Option<Head>, Response> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Err(Response::error(
                431,
                format_args!("the request head is longer than {MAX_HEAD} bytes"),
            ))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Response::error(400, format_args!("malformed request: {e}"))),
    };
    let (body_len, expects_continue) = head_fields(&parsed)?;
    if body_len > MAX_SYMBOL_BODY {
        return Err(Response::error(
            413,
            format_args!("the body has {body_len} bytes; at most {MAX_SYMBOL_BODY}"),
        ));
    }
    let body = match body_len {
        0 => None,
        _ => Some(BodyReservation::take(bodies, body_len).ok_or_else(|| {
            Response::error(
                503,
                format_args!(
                    "other requests' bodies already take the {BODY_BUDGET} bytes held at once; \
                     retry later"
                ),
            )
        })?),
    };
    let head = Head {
        len,
        method: parsed.method.unwrap_or("").to_string(),
        target: parsed.path.unwrap_or("").to_string(),
        body_len,
        _body: body,
    };
    if expects_continue && body_len > buf.len() - len {
        // Best effort: a client that does not get it sends the body after its own timeout.
        let _ = stream.write(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    buf.reserve_exact((len + body_len).saturating_sub(buf.len()));
    Ok(Some(head))
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

/// Starts the listener the `http` setting asks for, if it is not running on that address yet; a
/// failure (the port in use, a host name that does not resolve) is said on stderr, with what to
/// do, and kept for `stats().http_listener`. Call only outside an allocation (it spawns threads)
/// and after initialisation.
pub(crate) fn start_configured() {
    let _guard = Guard::enter();
    // Lock order: `HTTP_ADDR`, then `HTTP_LISTENER` (see there).
    let wanted = lock(&crate::base::settings::HTTP_ADDR);
    let Some(addr) = wanted.as_deref() else {
        return;
    };
    let mut listener = lock(&HTTP_LISTENER);
    // The same address again (a `configure` of another key) starts nothing; after a failure it
    // is tried again, as the message says.
    if listener.0.as_deref() == Some(addr) && matches!(listener.1, ListenerState::Serving(_)) {
        return;
    }
    listener.0 = Some(addr.to_string());
    listener.1 = match serve(addr) {
        Ok(server) => ListenerState::Serving(server.addr),
        Err(e) => {
            eprintln!("{}", cannot_serve(addr, &e));
            ListenerState::Failed(e.kind())
        }
    };
}

/// What a user reads when the `http` setting's listener cannot start: why, and what to do.
fn cannot_serve(addr: &str, e: &io::Error) -> String {
    let what_to_do = match e.kind() {
        io::ErrorKind::AddrInUse => {
            "another process (or another copy of this one) holds the port: stop it, or choose a \
             free port, e.g. JEPROF_SHIM=http:127.0.0.1:0 for any, or configure(\"http:...\")"
        }
        io::ErrorKind::AddrNotAvailable => {
            "the address is not one of this host's: use 127.0.0.1:<port>, or 0.0.0.0:<port> for \
             every interface"
        }
        io::ErrorKind::PermissionDenied => "ports below 1024 need privileges: choose one above",
        _ => "check the host name and port (e.g. http:127.0.0.1:6060 or http:localhost:6060)",
    };
    format!(
        "jeprof-shim: cannot serve HTTP on {addr}: {e}; the program runs on without the \
         listener (stats().http_listener says so): {what_to_do}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_cap_is_a_quarter_of_the_descriptors_less_those_past_the_loop() {
        // 1,024 / 4 = 256, less 128 waiting, 4 with workers and 3 of the loop's own.
        assert_eq!(connection_cap(Some(1024)), 121);
        assert_eq!(connection_cap(Some(2588)), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(2584)), MAX_CONNECTIONS - 1);
        assert_eq!(connection_cap(Some(1 << 20)), MAX_CONNECTIONS);
        assert_eq!(connection_cap(None), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(64)), MIN_CONNECTIONS);
        assert_eq!(connection_cap(Some(0)), MIN_CONNECTIONS);
    }

    #[test]
    fn body_budget_is_taken_and_given_back() {
        let taken = Arc::new(AtomicUsize::new(0));
        let first = BodyReservation::take(&taken, BODY_BUDGET - 10).unwrap();
        assert!(BodyReservation::take(&taken, 11).is_none());
        let second = BodyReservation::take(&taken, 10).unwrap();
        drop(first);
        assert_eq!(taken.load(Ordering::Relaxed), 10);
        drop(second);
        assert_eq!(taken.load(Ordering::Relaxed), 0);
    }
}
