//! `GET /debug/pprof/allocator` serves what `jeprof-compat report --allocator` prints after its
//! table for a dump of the same process ([`jeprof_dumpfmt::allocator::describe`] of the dump's
//! figures and in-use total): the same lines in the same order, the same reading, and figures
//! that agree with the dump taken right after it; then `dump_near_limit`'s lines, off here.

#[path = "common/http.rs"]
mod client;

use jeprof_shim::jeprof_dumpfmt::allocator::{describe, AllocatorFigures};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// The text with each number (a run of digits, with its `.` and `,`) replaced by `#`.
fn masked(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        let digit = c.is_ascii_digit() || (in_number && (c == '.' || c == ','));
        if digit && !in_number {
            out.push('#');
        } else if !digit {
            out.push(c);
        }
        in_number = digit;
    }
    out
}

/// `<name>: <bytes> B` lines.
fn figures_of(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(": ")?;
            Some((name.to_string(), rest.strip_suffix(" B")?.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_allocator_endpoint_serves_what_report_allocator_prints_for_a_dump_of_the_moment() {
    jeprof_shim::configure("sample_rate:4096,symbolize:false").unwrap();
    let blocks: Vec<Vec<u8>> = (0..8192).map(|i| vec![i as u8; 1024]).collect();
    let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();

    let served = client::get(addr, "/debug/pprof/allocator").unwrap();
    assert_eq!(served.status, 200, "{}", served.text());
    let content_type = served
        .headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str());
    assert!(
        content_type.is_some_and(|t| t.starts_with("text/plain")),
        "{content_type:?}"
    );
    let served_text = served.text();
    // The allocator's reading, then the near-limit watcher's lines.
    let near_at = served_text
        .find("near_limit")
        .expect("the near-limit lines");
    let (text, near) = served_text.split_at(near_at);
    assert_eq!(near, "near_limit: off (dump_near_limit)\n");

    let dump = client::get(addr, "/pprof/heap").unwrap();
    assert_eq!(dump.status, 200);
    let profile = jeprof_shim::jeprof_dumpfmt::read::parse(&dump.body).unwrap();
    let figures = AllocatorFigures::from_annotations(&profile.annotations).unwrap();
    let printed = describe(&figures, Some(&profile.totals().inuse), 1);
    println!("{text}");

    // The same lines and reading, numbers aside.
    assert_eq!(masked(text), masked(&printed), "{text}\n{printed}");
    // The same figures, up to what the listener allocated and freed between the two requests.
    let (served, dumped) = (figures_of(text), figures_of(&printed));
    assert_eq!(
        served.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        dumped.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    assert_eq!(served[0].0, "allocated");
    for ((name, a), (_, b)) in served.iter().zip(&dumped) {
        let tolerance = (4u64 << 20).max(a.max(b) / 10);
        assert!(
            a.abs_diff(*b) <= tolerance,
            "{name}: {a} served, {b} dumped"
        );
    }
    // The pprof profile carries the figures as comments.
    let heap = client::get(addr, "/debug/pprof/heap").unwrap();
    assert_eq!(heap.status, 200);
    let pb = jeprof_shim::jeprof_dumpfmt::pprof::read_gz(&heap.body).unwrap();
    let comments: Vec<&str> = pb
        .comment
        .iter()
        .map(|&i| pb.string_table[i as usize].as_str())
        .collect();
    for key in [
        "allocator: jemalloc",
        "allocator_allocated: ",
        "allocator_retained: ",
        "profiler_bytes: ",
        "process_rss_anon: ",
    ] {
        assert!(
            comments.iter().any(|c| c.starts_with(key)),
            "{key}: {comments:?}"
        );
    }
    drop(blocks);
}
