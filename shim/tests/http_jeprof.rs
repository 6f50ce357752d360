//! The legacy jeprof, given only a URL (`jeprof --text http://127.0.0.1:PORT/pprof/heap`, no
//! binary, no local file), fetches the heap, posts the addresses to `/pprof/symbol`, reads
//! `/pprof/cmdline`, and prints the same table as `jeprof --text` on a dump of the same moment.

#[path = "common/http.rs"]
mod client;
mod common;

use std::time::Duration;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

fn table(args: &[&str]) -> jeprof_conformance::Text {
    let out = jeprof_conformance::run(args);
    assert!(
        out.status == 0,
        "jeprof {args:?} failed: {}\n{}",
        out.stderr,
        out.stdout
    );
    jeprof_conformance::parse_text(&out.stdout)
        .unwrap_or_else(|e| panic!("jeprof {args:?}: {e}\n{}", out.stdout))
}

fn main() {
    client::watchdog(Duration::from_secs(300), "http_jeprof");
    jeprof_shim::reseed(5);
    let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
    let live = common::run(100);
    // The same moment for both: nothing is sampled from here on.
    jeprof_shim::set_active(false);
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("heap.prof");
    jeprof_shim::dump(&dump).unwrap();

    let url = format!("http://{}/pprof/heap", server.local_addr());
    for mode in ["--inuse_space", "--alloc_space", "--inuse_objects"] {
        let remote = table(&["--text", "--show_bytes", mode, &url]);
        let local = table(&["--text", "--show_bytes", mode, dump.to_str().unwrap()]);
        assert!(remote.total.is_some(), "{mode}: no total from {url}");
        assert_eq!(remote.total, local.total, "{mode}: totals differ");
        assert_eq!(remote.rows, local.rows, "{mode}: tables differ");
        for (site, _) in common::SITES {
            assert!(
                remote
                    .rows
                    .keys()
                    .any(|name| name.ends_with(&format!("::{site}"))),
                "{mode}: {site} not named by /pprof/symbol: {:?}",
                remote.rows.keys().collect::<Vec<_>>()
            );
        }
        println!(
            "{mode}: {} rows, total {:?}, same as the dump",
            remote.rows.len(),
            remote.total
        );
    }
    // What jeprof names the program: argv[0], from /pprof/cmdline.
    let cmdline = client::get(server.local_addr(), "/pprof/cmdline").unwrap();
    assert_eq!(cmdline.status, 200);
    let argv0 = std::env::args().next().unwrap();
    assert_eq!(cmdline.text().split('\0').next(), Some(argv0.as_str()));
    drop(live);
    println!("ok");
}
