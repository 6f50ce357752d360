//! The profiles over HTTP (the `http` feature): a standalone listener ([`serve`], or the
//! `http:<ip:port>` setting), and the same endpoints as a plain function ([`handle`]) to mount in
//! a program's own router. No async runtime: the listener is an event-loop thread (mio) and a few
//! workers of its own.
//!
//! | Path | Method | Serves |
//! |---|---|---|
//! | `/` | GET | HTML: the heap at a glance ([`jeprof_page`]): the in-use flame graph, the top sites by user frame with bytes, objects and 95% intervals (sortable; with `rss` on, their resident bytes too), the allocator's figures and the gap to RSS, live bytes over time from the leak history with suspects marked, scopes, links to the endpoints below; self-contained (no external URL), the numbers `jeprof-compat report` prints for a dump of the same moment; `?since=DURATION` (`90s`, `5m`, `1h`): what grew over the leak history since then (a differential flame graph, each user frame's change coloured only where significant), with a menu of the moments the history holds |
//! | `/debug/pprof/heap` | GET | gzipped pprof, four sample types, `inuse_space` first |
//! | `/debug/pprof/allocs` | GET | the same, `alloc_space` first |
//! | `/debug/pprof/peak` | GET | the heap at its peak ([`crate::peak_snapshot`]) as pprof |
//! | `/debug/pprof/rss` | GET | gzipped pprof of the live heap with each stack's `inuse_space`, `resident_space`, `swapped_space` and (jemalloc only) `fragmentation_space`, `resident_space` first ([`jeprof_dumpfmt::pprof::rss`]); 404 when the `rss` setting is off, 503 when the page map is unreadable |
//! | `/debug/pprof/allocator` | GET | text: the allocator's figures now and their reading, as `jeprof-compat report --allocator` prints them ([`jeprof_dumpfmt::allocator::describe`]) |
//! | `/debug/pprof/leaks` | GET | the stacks still growing ([`crate::leak_suspects`]): a table; `?format=json` for JSON; 503 while the history is too short |
//! | `/debug/pprof/symbol` | GET, POST | as `/pprof/symbol`: where `go tool pprof` asks for the frames nothing named |
//! | `/pprof/heap` | GET | heap_v2 text without symbols, for `jeprof http://host:port/pprof/heap` |
//! | `/pprof/symbol` | GET, POST | `num_symbols: 1`; names for `0x<hex>+0x<hex>...` |
//! | `/pprof/cmdline` | GET | the arguments, NUL-separated (jeprof names the program by them) |
//!
//! The `/debug/pprof/*` paths take Go's parameters: `seconds=N` (1 to
//! [`MAX_WINDOW_SECONDS`]; not for `peak` and `rss`) blocks N seconds and answers a delta profile whose
//! `alloc_*` figures count only what was allocated in those seconds, while `inuse_*` are the
//! current figures (Go's own delta subtracts in-use figures too, which is meaningless for a
//! quantity that is not cumulative); `debug=N` with N ≥ 1 answers the profile as symbolized heap_v2
//! text (what `jeprof --text` reads) instead of pprof; `gc` is accepted and ignored. Parca with
//! `delta` on appends `?seconds=<interval>`; Grafana Alloy pulls `/debug/pprof/allocs`. Both go
//! `go tool pprof http://127.0.0.1:6060/debug/pprof/heap` and
//! `jeprof --text http://127.0.0.1:6060/pprof/heap` work without the binary: the pprof profile
//! carries function names, and jeprof asks `/pprof/symbol` for the addresses it needs.
//!
//! A request that cannot be served gets a 4xx with a one-line reason: an unknown path (404), a
//! method a path does not serve (405), a bad parameter (400), a `/pprof/symbol` body over
//! [`MAX_SYMBOL_BODY`] (413) or chunked (411), a head over 16 KiB (431) or not sent within 10 s
//! (408); 503 when [`MAX_CONCURRENT_WINDOWS`] `seconds` requests already wait, or the listener's
//! queue is full or already holds 4 MiB of request bodies. Under a connection flood the listener
//! closes the oldest connections still sending their requests ([`Server::max_connections`]).
//!
//! **Security**: a profile reveals code addresses, the memory map (library paths, address-space
//! layout), the command line and host name. Bind to loopback (`127.0.0.1`) unless the network is
//! trusted; there is no authentication.
//!
//! **No interference with the service**: everything the handlers and the listener allocate is
//! outside sampling (they run inside the profiler's re-entrancy guard), so serving never shows as
//! the service's memory; profiles are built in memory (no temporary files) and symbolized only
//! for the addresses asked, with the symbolizer's caches dropped after. When mounted in a
//! program's own router, the router's allocations are the program's and are sampled; the
//! handler's are not.

mod handlers;
mod listener;

pub use handlers::{
    handle, Request, Response, MAX_CONCURRENT_WINDOWS, MAX_SYMBOL_BODY, MAX_WINDOW_SECONDS, PATHS,
};
pub(crate) use listener::start_configured as listener_for_settings;
pub use listener::{
    serve, Server, MAX_CONNECTIONS, MAX_HEAD, QUEUE, READ_DEADLINE, SHUTDOWN_WAIT, WORKERS,
    WRITE_DEADLINE,
};
