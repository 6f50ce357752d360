//! `report http://host:port/pprof/heap`: a profile fetched from a process as jeprof fetches it,
//! from a test-local HTTP server (tiny_http) serving the three pages from a real dump; the report
//! must be jeprof's, and every failure an exit 2 naming the page.

mod common;

use std::sync::Arc;
use std::thread::JoinHandle;

use jeprof_dumpfmt::SymbolTable;

/// A server of `/pprof/heap`, `/pprof/symbol` (GET: the symbol count, POST: names for the
/// addresses asked) and `/pprof/cmdline`, stopped when dropped.
struct Server {
    base: String,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(heap: Vec<u8>, symbols: SymbolTable) -> Server {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("a local port"));
    let base = format!("http://{}", server.server_addr());
    let serving = server.clone();
    let thread = std::thread::spawn(move || {
        for mut request in serving.incoming_requests() {
            let body: Vec<u8> = match (request.method(), request.url()) {
                (tiny_http::Method::Get, "/pprof/heap") => heap.clone(),
                (tiny_http::Method::Get, "/pprof/cmdline") => b"fixture\0--serve\n".to_vec(),
                (tiny_http::Method::Get, "/pprof/symbol") => {
                    format!("num_symbols: {}\n", symbols.names.len()).into_bytes()
                }
                (tiny_http::Method::Post, "/pprof/symbol") => {
                    let mut asked = String::new();
                    let _ = request.as_reader().read_to_string(&mut asked);
                    let mut answer = String::new();
                    for a in asked.split('+') {
                        let Some(address) = a
                            .trim()
                            .strip_prefix("0x")
                            .and_then(|h| u64::from_str_radix(h, 16).ok())
                        else {
                            continue;
                        };
                        if let Some(names) = symbols.names.get(&address) {
                            let outer_first: Vec<&str> =
                                names.iter().rev().map(String::as_str).collect();
                            answer.push_str(&format!("0x{address:x} {}\n", outer_first.join("--")));
                        }
                    }
                    answer.into_bytes()
                }
                _ => {
                    let _ = request.respond(tiny_http::Response::empty(404));
                    continue;
                }
            };
            let _ = request.respond(tiny_http::Response::from_data(body));
        }
    });
    Server {
        base,
        server,
        thread: Some(thread),
    }
}

/// `symbolized.heap` as a process serves it: the dump without its symbol section (the names come
/// from the symbol page).
fn raw_symbolized() -> (Vec<u8>, SymbolTable) {
    let path = common::fixtures().join("symbolized.heap");
    let text = std::fs::read_to_string(&path).unwrap();
    let raw = &text[text.find("heap_v2/").unwrap()..];
    let symbols = jeprof_dumpfmt::read::read_file(&path)
        .unwrap()
        .symbols
        .unwrap();
    (raw.as_bytes().to_vec(), symbols)
}

#[test]
fn a_fetched_profile_reports_as_the_real_jeprof_reports_it() {
    let (raw, symbols) = raw_symbolized();
    let server = serve(raw, symbols);
    let url = format!("{}/pprof/heap", server.base);
    let ours = common::run_ok(&["report", "--show_bytes", &url]);
    // What jeprof prints for the dump with its symbol section, read from disk.
    let golden =
        std::fs::read_to_string(common::fixtures().join("expected/symbolized.show_bytes.txt"))
            .unwrap();
    assert_eq!(ours, golden);
    // The real jeprof, fetching from the same server (with curl).
    let jeprof = jeprof_conformance::run(&["--text", "--show_bytes", &url]);
    assert_eq!(jeprof.status, 0, "{}", jeprof.stderr);
    assert_eq!(ours, jeprof.stdout);
    // The program named by /pprof/cmdline titles the graph.
    let dot = common::run_ok(&["report", "--dot", &url]);
    assert!(dot.starts_with("digraph \"fixture; "), "{dot}");
}

#[test]
fn a_profile_served_with_its_symbols_needs_no_symbol_page() {
    let bytes = std::fs::read(common::fixtures().join("symbolized.heap")).unwrap();
    // No names on the symbol page: every name comes from the dump's own section.
    let server = serve(bytes, SymbolTable::default());
    let base = server.base.trim_start_matches("http://").to_string();
    // jeprof's `host:port` form, without the scheme.
    let ours = common::run_ok(&["report", "--show_bytes", &format!("{base}/pprof/heap")]);
    let golden =
        std::fs::read_to_string(common::fixtures().join("expected/symbolized.show_bytes.txt"))
            .unwrap();
    assert_eq!(ours, golden);
}

fn fails_with(args: &[&str], words: &[&str]) {
    let out = common::run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty());
    for w in words {
        assert!(stderr.contains(w), "{args:?}: {w:?} not in {stderr}");
    }
}

#[test]
fn fetch_failures_exit_2_naming_the_page_and_the_cause() {
    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("http://127.0.0.1:{port}/pprof/heap");
    fails_with(&["report", &refused], &[&refused]);

    let server = serve(
        b"this is not a heap profile\n".to_vec(),
        SymbolTable::default(),
    );
    let heap = format!("{}/pprof/heap", server.base);
    fails_with(&["report", &heap], &[&heap, "not a heap profile"]);
    let missing = format!("{}/prefix/pprof/growth", server.base);
    fails_with(&["report", &missing], &[&missing, "404"]);
    fails_with(
        &["report", "https://127.0.0.1:1/pprof/heap"],
        &["https is not supported"],
    );
}
