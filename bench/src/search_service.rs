//! The third realistic workload, behind the cargo feature `tantivy`: a search service built on
//! tantivy, the Rust search library. It indexes generated documents (a title, a body and a numeric
//! field), commits them into segments, then answers queries: each parses a query string, collects
//! the top ten hits and loads their stored titles, as a service's request would.
//!
//! Its allocation shape is a real library's, not ours: the indexer's per-term hash tables, posting
//! lists and block-compressed segment writers; the query parser's ASTs; the collectors' heaps and
//! the document store's decompression buffers. The shape decides the shim's share of jemalloc's
//! profiler's cost: about twice the other workloads' here (`bench/RESULTS.md`, the service
//! workloads), so it is measured beside them.
//!
//! One indexing thread and one merge at commit, so every run does the same work and callgrind's
//! counts repeat; tantivy's own threads (the merge's, the reader's) still run, as in a service.
//! The feature keeps tantivy (about 60 crates) out of CI's test build; the workspace's
//! `Cargo.lock` pins it all the same.

use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{Schema, Value, FAST, INDEXED, STORED, TEXT};
use tantivy::{doc, Index, IndexWriter, TantivyDocument};

/// The service's load: what the children take on their command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct SearchService {
    /// Documents indexed (a six-word title, a 120-word body, a number). With the default 1,000
    /// searches, 4,000 make a run of about 2.0 G instructions on plain jemalloc.
    #[arg(long, default_value_t = 4_000)]
    pub documents: u32,
    /// Queries answered (top ten hits each, their titles loaded).
    #[arg(long, default_value_t = 1_000)]
    pub searches: u32,
}

/// The words documents and queries are drawn from: a small vocabulary, so postings are long and
/// queries find hits, plus numbered words (one in eleven) so the term dictionary is large.
const VOCABULARY: [&str; 36] = [
    "heap", "profile", "sample", "arena", "stack", "frame", "symbol", "dwarf", "line", "inline",
    "unit", "index", "query", "search", "term", "posting", "segment", "merge", "commit", "reader",
    "writer", "token", "field", "score", "document", "whale", "ocean", "river", "mountain",
    "forest", "desert", "island", "harbor", "signal", "thread", "memory",
];

/// Appends `count` words drawn with `state` to `out` (cleared first).
fn words(state: &mut u64, count: usize, out: &mut String) {
    out.clear();
    for i in 0..count {
        let r = crate::realistic::next(state);
        if i > 0 {
            out.push(' ');
        }
        out.push_str(VOCABULARY[(r % VOCABULARY.len() as u64) as usize]);
        if r.is_multiple_of(11) {
            out.push_str(&((r >> 32) % 5_000).to_string());
        }
    }
}

/// One query string of the mix: two-word disjunctions, conjunctions, phrases, field queries with
/// an exclusion, and numbered terms.
fn query(state: &mut u64) -> String {
    let r = crate::realistic::next(state);
    let word = |k: u64| VOCABULARY[((r >> (8 * k)) % VOCABULARY.len() as u64) as usize];
    match r % 5 {
        0 => format!("{} {}", word(1), word(2)),
        1 => format!("{} AND {}", word(1), word(2)),
        2 => format!("\"{} {}\"", word(1), word(2)),
        3 => format!("title:{} -{}", word(1), word(2)),
        _ => format!("{}{}", word(1), (r >> 40) % 5_000),
    }
}

/// Indexes, commits and searches; returns a checksum of the hits (each query's count and its hits'
/// stored titles' lengths, in rank order), so the work cannot be optimised away and runs can be
/// compared.
pub fn search_service(load: &SearchService) -> tantivy::Result<u64> {
    let mut schema = Schema::builder();
    let title = schema.add_text_field("title", TEXT | STORED);
    let body = schema.add_text_field("body", TEXT);
    let rank = schema.add_u64_field("rank", INDEXED | FAST);
    let index = Index::create_in_ram(schema.build());
    // tantivy's smallest budget for one indexing thread.
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000)?;
    let mut state = 0x7a17_u64;
    let (mut t, mut b) = (String::new(), String::new());
    for i in 0..load.documents {
        words(&mut state, 6, &mut t);
        words(&mut state, 120, &mut b);
        writer.add_document(doc!(title => t.as_str(), body => b.as_str(), rank => u64::from(i)))?;
        // A commit every 2,500 documents: several segments, merged by the writer's policy.
        if i % 2_500 == 2_499 {
            writer.commit()?;
        }
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let parser = QueryParser::for_index(&index, vec![title, body]);
    let mut checksum = 0u64;
    for _ in 0..load.searches {
        let text = query(&mut state);
        let parsed = parser
            .parse_query(&text)
            .map_err(|e| tantivy::TantivyError::InvalidArgument(e.to_string()))?;
        let top = searcher.search(&parsed, &TopDocs::with_limit(10))?;
        checksum = checksum.wrapping_mul(31).wrapping_add(top.len() as u64);
        for (_, address) in top {
            let stored: TantivyDocument = searcher.doc(address)?;
            let length = stored
                .get_first(title)
                .and_then(|v| v.as_str())
                .map_or(0, str::len);
            checksum = checksum.wrapping_mul(31).wrapping_add(length as u64);
        }
    }
    Ok(checksum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_service_is_deterministic_and_depends_on_its_load() {
        let small = SearchService {
            documents: 300,
            searches: 40,
        };
        let a = search_service(&small).unwrap();
        assert_eq!(a, search_service(&small).unwrap());
        assert_ne!(
            a,
            search_service(&SearchService {
                searches: 41,
                ..small
            })
            .unwrap()
        );
    }
}
