//! Workloads that do real work besides allocating, for measuring the profiler where allocation is
//! a part of the cost rather than all of it (issue 16). Each is deterministic (a fixed seed), runs
//! on one thread, and returns a checksum of what it computed, which the children print so the
//! work cannot be optimised away and two runs can be compared.
//!
//! - [`log_index`]: a log pipeline and search index: generates access-log lines, parses each
//!   (`key=value` fields, the request path), builds an inverted index from token to line numbers
//!   and per-path latency totals, then answers two-token queries by intersecting posting lists.
//!   Strings of many sizes are made and freed, hash maps and vectors grow, and most of the
//!   instructions go to parsing, hashing and searching.
//! - [`kv_store`]: an in-memory key–value store under a mixed load: gets that checksum the value
//!   they find, puts of values from 16 B to 64 KiB (most small, a few large, as caches see),
//!   deletes, and short ordered scans that copy keys out. Fewer, larger and longer-lived
//!   allocations than the log pipeline, over a table that grows, shrinks and is rehashed.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The log pipeline's shape: what the children take on their command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct LogIndex {
    /// Log lines generated, parsed and indexed.
    #[arg(long, default_value_t = 200_000)]
    pub lines: u32,
    /// Two-token queries answered from the index.
    #[arg(long, default_value_t = 20_000)]
    pub queries: u32,
}

/// splitmix64: a fixed, fast generator, so every run does the same work.
pub(crate) fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const METHODS: [&str; 4] = ["GET", "GET", "POST", "DELETE"];
const RESOURCES: [&str; 8] = [
    "users", "orders", "items", "carts", "search", "images", "sessions", "reports",
];
const AGENTS: [&str; 5] = ["curl", "firefox", "chrome", "okhttp", "python-requests"];

/// One generated access-log line.
fn make_line(state: &mut u64, i: u32) -> String {
    let r = next(state);
    let method = METHODS[(r & 3) as usize];
    let resource = RESOURCES[((r >> 2) & 7) as usize];
    let id = (r >> 8) % 5_000;
    let status = [200, 200, 200, 201, 304, 404, 500][((r >> 24) % 7) as usize];
    let ms = (r >> 32) % 900 + 1;
    let agent = AGENTS[((r >> 44) % 5) as usize];
    format!(
        "ts={} method={method} path=/api/v1/{resource}/{id} status={status} ms={ms} agent={agent}/{}",
        1_700_000_000 + u64::from(i),
        (r >> 50) % 40
    )
}

/// Runs the pipeline; returns a checksum of the index's answers and the latency totals.
pub fn log_index(shape: &LogIndex) -> u64 {
    let mut state = 0x5eed_u64;
    let mut index: HashMap<String, Vec<u32>> = HashMap::new();
    let mut per_path: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for i in 0..shape.lines {
        let line = make_line(&mut state, i);
        let mut ms = 0u64;
        let mut path = "";
        for field in line.split(' ') {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            match key {
                "ts" => continue,
                "ms" => ms = value.parse().unwrap_or(0),
                "path" => path = value,
                _ => {}
            }
            // Index `key:value` and, for paths, every segment.
            index.entry(format!("{key}:{value}")).or_default().push(i);
            if key == "path" {
                for segment in value.split('/').filter(|s| !s.is_empty()) {
                    index.entry(segment.to_string()).or_default().push(i);
                }
            }
        }
        // Latency per route (the path without its id).
        let route = path.rsplit_once('/').map_or(path, |(r, _)| r).to_string();
        let totals = per_path.entry(route).or_default();
        totals.0 += 1;
        totals.1 += ms;
    }
    // Sorted: the map's iteration order is random per process, the queries must not be.
    let mut keys: Vec<&String> = index.keys().collect();
    keys.sort_unstable();
    let mut checksum = 0u64;
    for _ in 0..shape.queries {
        let r = next(&mut state);
        let a = keys[(r % keys.len() as u64) as usize];
        let b = keys[((r >> 32) % keys.len() as u64) as usize];
        let (pa, pb) = (&index[a], &index[b]);
        // Intersect two sorted posting lists.
        let (mut x, mut y, mut hits) = (0, 0, Vec::new());
        while x < pa.len() && y < pb.len() {
            match pa[x].cmp(&pb[y]) {
                std::cmp::Ordering::Less => x += 1,
                std::cmp::Ordering::Greater => y += 1,
                std::cmp::Ordering::Equal => {
                    hits.push(pa[x]);
                    x += 1;
                    y += 1;
                }
            }
        }
        let answer = format!("{a} & {b}: {} hits", hits.len());
        checksum = checksum
            .wrapping_mul(31)
            .wrapping_add(answer.len() as u64 + hits.len() as u64);
    }
    for (route, (count, ms)) in &per_path {
        checksum = checksum
            .wrapping_mul(31)
            .wrapping_add(route.len() as u64 + count + ms);
    }
    checksum
}

/// The key–value store's load: what the children take on their command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct KvStore {
    /// Operations, mixed: 60% gets, 25% puts, 10% deletes, 5% scans of 16 keys.
    #[arg(long, default_value_t = 400_000)]
    pub operations: u32,
    /// Distinct keys the load draws from (so the store holds up to about this many).
    #[arg(long, default_value_t = 50_000)]
    pub keys: u32,
}

/// A value's size: 70% 16–255 B, 25% 256 B–4 KiB, 5% 4–64 KiB.
fn value_size(r: u64) -> usize {
    let pick = r % 100;
    let within = (r >> 8) as usize;
    match pick {
        0..70 => 16 + within % 240,
        70..95 => 256 + within % (4096 - 256),
        _ => 4096 + within % (65536 - 4096),
    }
}

/// FNV-1a over a value: the read side's work, which grows with the value.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs the load; returns a checksum of what the gets and scans saw, and the store's final size.
pub fn kv_store(load: &KvStore) -> u64 {
    let mut state = 0x6b76_u64;
    // Ordered, like an LSM memtable or a B-tree index: scans need the order.
    let mut store: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let keys = u64::from(load.keys.max(1));
    let mut checksum = 0u64;
    for _ in 0..load.operations {
        let r = next(&mut state);
        let key = format!("user:{:08}:profile", (r >> 16) % keys);
        match r % 100 {
            0..60 => {
                if let Some(value) = store.get(&key) {
                    checksum = checksum.wrapping_add(fnv1a(value));
                }
            }
            60..85 => {
                let size = value_size(next(&mut state));
                // The value's bytes depend on its key and size, as a serialised record would.
                let seed = r as u8;
                let value: Vec<u8> = (0..size).map(|i| seed.wrapping_add(i as u8)).collect();
                store.insert(key, value);
            }
            85..95 => {
                if let Some(old) = store.remove(&key) {
                    checksum = checksum.wrapping_add(old.len() as u64);
                }
            }
            _ => {
                // A short ordered scan, its keys copied out as a response would be.
                let page: Vec<String> = store
                    .range(key..)
                    .take(16)
                    .map(|(k, v)| format!("{k}={}", v.len()))
                    .collect();
                checksum = checksum
                    .wrapping_mul(31)
                    .wrapping_add(page.iter().map(|s| s.len() as u64).sum::<u64>());
            }
        }
    }
    checksum.wrapping_mul(31).wrapping_add(store.len() as u64)
}

/// Runs `work`, printing its checksum and the time it took (`elapsed_ns`, and `cpu_ns`: the
/// process's CPU time, as the churn without a warm-up reports it), for the paired CPU-time rounds.
pub fn run_timed(work: impl FnOnce() -> u64) {
    let (wall, cpu) = (Instant::now(), crate::workload::process_cpu_time());
    let checksum = work();
    let cpu = crate::workload::process_cpu_time().saturating_sub(cpu);
    let wall: Duration = wall.elapsed();
    println!("checksum {checksum}");
    crate::workload::print_timing(&crate::workload::Timing { wall, cpu });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_index_is_deterministic_and_depends_on_its_shape() {
        let small = LogIndex {
            lines: 2_000,
            queries: 200,
        };
        let a = log_index(&small);
        assert_eq!(a, log_index(&small));
        // The same again in this process: the map's random iteration order must not matter.
        assert_eq!(a, log_index(&small));
        assert_ne!(
            a,
            log_index(&LogIndex {
                lines: 2_001,
                ..small
            })
        );
    }

    #[test]
    fn kv_store_is_deterministic_and_depends_on_its_load() {
        let small = KvStore {
            operations: 5_000,
            keys: 500,
        };
        let a = kv_store(&small);
        assert_eq!(a, kv_store(&small));
        assert_ne!(
            a,
            kv_store(&KvStore {
                operations: 5_001,
                ..small
            })
        );
    }

    #[test]
    fn value_sizes_cover_small_medium_and_large_values() {
        let mut state = 3;
        let sizes: Vec<usize> = (0..10_000).map(|_| value_size(next(&mut state))).collect();
        assert!(sizes.iter().all(|&s| (16..65536).contains(&s)));
        let small = sizes.iter().filter(|&&s| s < 256).count();
        let large = sizes.iter().filter(|&&s| s >= 4096).count();
        // 70% and 5%, within a few points.
        assert!((6_500..7_500).contains(&small), "{small}");
        assert!((300..700).contains(&large), "{large}");
    }

    #[test]
    fn generated_lines_parse_into_the_fields_the_index_uses() {
        let mut state = 1;
        let line = make_line(&mut state, 7);
        for key in [
            "ts=",
            "method=",
            "path=/api/v1/",
            "status=",
            "ms=",
            "agent=",
        ] {
            assert!(line.contains(key), "{line}");
        }
    }
}
