//! One process, one measured dump: a tantivy index built and queried under `Profiled<Jemalloc>`,
//! then `jeprof_shim::dump` with symbolization on or off, while a second thread reads
//! `/proc/self/status` every millisecond for the highest `RssAnon` and `RssFile` during the dump.
//!
//! `symbench on|off DUMP [DOCS]` prints one line of `key=value` figures; `run.sh` runs both modes
//! of each binary and subtracts: the dump's own growth with symbolization off is the writing and
//! the snapshot, the difference is what symbolization cost.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tantivy::collector::Count;
use tantivy::query::QueryParser;
use tantivy::schema::{Schema, STORED, TEXT};
use tantivy::{doc, Index, IndexWriter};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// `RssAnon` and `RssFile` of this process, in bytes, read into a stack buffer (the sampler
/// allocates nothing while it measures).
fn rss() -> (u64, u64) {
    let mut buf = [0u8; 4096];
    let mut n = 0;
    if let Ok(mut f) = std::fs::File::open("/proc/self/status") {
        while n < buf.len() {
            match f.read(&mut buf[n..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
    }
    let text = std::str::from_utf8(&buf[..n]).unwrap_or("");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("RssAnon:"), field("RssFile:"))
}

/// A deterministic word list and text generator (xorshift), so every run indexes the same text.
fn words(seed: &mut u64, count: usize, out: &mut String) {
    const VOCAB: &[&str] = &[
        "heap", "profile", "sample", "arena", "stack", "frame", "symbol", "dwarf", "line",
        "inline", "unit", "index", "query", "search", "term", "posting", "segment", "merge",
        "commit", "reader", "writer", "token", "field", "score", "document", "whale", "ocean",
        "river", "mountain", "forest", "desert", "island", "harbor", "signal", "thread", "memory",
    ];
    out.clear();
    for i in 0..count {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        if i > 0 {
            out.push(' ');
        }
        out.push_str(VOCAB[(*seed % VOCAB.len() as u64) as usize]);
        if *seed % 11 == 0 {
            out.push_str(&format!("{}", *seed % 5000));
        }
    }
}

/// Builds an index of `docs` documents in memory and runs queries over it; returns the index and
/// the total hit count (kept alive: a service's heap at dump time).
fn workload(docs: usize) -> tantivy::Result<(Index, usize)> {
    let mut schema = Schema::builder();
    let title = schema.add_text_field("title", TEXT | STORED);
    let body = schema.add_text_field("body", TEXT);
    let index = Index::create_in_ram(schema.build());
    let mut writer: IndexWriter = index.writer(64 << 20)?;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut t, mut b) = (String::new(), String::new());
    for _ in 0..docs {
        words(&mut seed, 6, &mut t);
        words(&mut seed, 120, &mut b);
        writer.add_document(doc!(title => t.as_str(), body => b.as_str()))?;
    }
    writer.commit()?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let parser = QueryParser::for_index(&index, vec![title, body]);
    let mut hits = 0;
    for q in [
        "whale ocean",
        "heap AND profile",
        "\"stack frame\"",
        "symbol OR dwarf",
        "title:river -forest",
        "memory thread signal",
    ] {
        let query = parser
            .parse_query(q)
            .map_err(|e| tantivy::TantivyError::InvalidArgument(e.to_string()))?;
        hits += searcher.search(&query, &Count)?;
    }
    Ok((index, hits))
}

/// One SQL query (grouping, aggregates, string functions, sorting) planned and run by DataFusion;
/// the number of rows it returned.
#[cfg(feature = "datafusion")]
fn sql_workload() -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let ctx = datafusion::prelude::SessionContext::new();
        let frame = ctx
            .sql(
                "SELECT a % 7 AS k, count(*) AS n, sum(b) AS s, max(upper(c)) AS m \
                 FROM (VALUES (1, 2.5, 'x'), (2, 3.5, 'y'), (3, 1.0, 'z'), (9, 4.0, 'w')) \
                 AS t(a, b, c) GROUP BY a % 7 ORDER BY k",
            )
            .await
            .expect("plan");
        let batches = frame.collect().await.expect("run");
        batches.iter().map(|b| b.num_rows()).sum()
    })
}

#[cfg(not(feature = "datafusion"))]
fn sql_workload() -> usize {
    0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 || !matches!(args[1].as_str(), "on" | "off") {
        eprintln!("usage: symbench on|off DUMP [DOCS]");
        std::process::exit(2);
    }
    let symbolize = args[1] == "on";
    let docs = args.get(3).and_then(|d| d.parse().ok()).unwrap_or(100_000);
    let (index, hits) = workload(docs).expect("the tantivy workload");
    let rows = sql_workload();
    jeprof_shim::configure(&format!("symbolize:{symbolize}")).expect("symbolize setting");

    let (anon_before, file_before) = rss();
    let peak_anon = Arc::new(AtomicU64::new(anon_before));
    let peak_file = Arc::new(AtomicU64::new(file_before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak_anon, peak_file, stop) = (peak_anon.clone(), peak_file.clone(), stop.clone());
        std::thread::spawn(move || {
            // Ordering: `stop` is set after the dump returns; one more reading follows it.
            while !stop.load(Ordering::Acquire) {
                let (a, f) = rss();
                peak_anon.fetch_max(a, Ordering::Relaxed);
                peak_file.fetch_max(f, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
            let (a, f) = rss();
            peak_anon.fetch_max(a, Ordering::Relaxed);
            peak_file.fetch_max(f, Ordering::Relaxed);
        })
    };
    let started = Instant::now();
    jeprof_shim::dump(&args[2]).expect("dump");
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Release);
    sampler.join().expect("sampler");
    let (anon_after, _) = rss();
    let cost = jeprof_shim::stats().last_symbolization;
    let binary = std::fs::metadata("/proc/self/exe").map_or(0, |m| m.len());
    println!(
        "mode={} binary_bytes={} docs={} hits={} sql_rows={} anon_before={} anon_peak_growth={} anon_after_growth={} file_peak_growth={} dump_ms={:.1} addresses={} symbolizer_peak_bytes={} symbolizer_retained_bytes={}",
        args[1],
        binary,
        docs,
        hits,
        rows,
        anon_before,
        peak_anon.load(Ordering::Relaxed) as i64 - anon_before as i64,
        anon_after as i64 - anon_before as i64,
        peak_file.load(Ordering::Relaxed) as i64 - file_before as i64,
        elapsed.as_secs_f64() * 1e3,
        cost.map_or(0, |c| c.addresses),
        cost.map_or(0, |c| c.peak_bytes),
        cost.map_or(0, |c| c.retained_bytes),
    );
    drop(index);
}
