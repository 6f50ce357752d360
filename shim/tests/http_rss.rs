//! `/debug/pprof/rss` read by `go tool pprof` (a real client): a site whose large blocks are all
//! written shows resident bytes within its sampling interval of the truth, a reserve never
//! touched shows next to none, and `resident_space` is what pprof shows by default. With the
//! `rss` setting off the endpoint answers 404 with the reason. Needs `go`
//! ([`jeprof_conformance::require_go`]: skipped with a notice where it is missing, a failure
//! under `CI=true`).

#[path = "common/http.rs"]
mod client;
#[path = "common/go_pprof.rs"]
mod go_pprof;

use std::hint::black_box;
use std::time::Duration;

use go_pprof::{cum_of, go_top};
use jeprof_shim::jeprof_dumpfmt::pprof::read_gz;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// The sample period: a quarter of a block, so that nearly every block is sampled
/// (`p = 1 − e^−4 ≈ 0.98`) and the interval is narrow.
const PERIOD: u64 = 16 << 10;
/// Each site keeps 256 blocks of 64 KiB (16 MiB).
const BLOCK: usize = 64 << 10;
const BLOCKS: usize = 256;

#[inline(never)]
fn site_reserve() -> Vec<u8> {
    Vec::with_capacity(BLOCK)
}

#[inline(never)]
fn site_touched() -> Vec<u8> {
    // Not zeros: `vec![0; n]` may come from pages never written.
    vec![1u8; BLOCK]
}

/// The standard deviation of the estimate of `BLOCKS` blocks of `BLOCK` bytes each counted
/// whole: each is sampled with probability `p = 1 − e^(−BLOCK/PERIOD)` and then stands for
/// `BLOCK/p`, so the sum is `(BLOCK/p)·Binomial(BLOCKS, p)`, of variance
/// `BLOCKS·BLOCK²·(1 − p)/p`.
fn sampling_sd() -> f64 {
    let p = 1.0 - (-(BLOCK as f64) / PERIOD as f64).exp();
    BLOCK as f64 * (BLOCKS as f64 * (1.0 - p) / p).sqrt()
}

fn main() {
    let Some(go) = jeprof_conformance::require_go() else {
        return;
    };
    client::watchdog(Duration::from_secs(300), "http_rss");
    let scratch = tempfile::tempdir().unwrap();
    jeprof_shim::configure(&format!("sample_rate:{PERIOD}")).unwrap();
    jeprof_shim::reseed(23);
    let server = jeprof_shim::serve("127.0.0.1:0").unwrap();
    let url = format!("http://{}/debug/pprof/rss", server.local_addr());

    let reserve: Vec<Vec<u8>> = (0..BLOCKS).map(|_| site_reserve()).collect();
    let touched: Vec<Vec<u8>> = (0..BLOCKS).map(|_| site_touched()).collect();
    jeprof_shim::set_active(false);

    // The profile as served: the four types, resident first.
    let answer = client::get(server.local_addr(), "/debug/pprof/rss").unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    let pb = read_gz(&answer.body).expect("a gzipped profile");
    let s = |i: i64| pb.string_table[i as usize].as_str();
    let types: Vec<&str> = pb.sample_type.iter().map(|t| s(t.r#type)).collect();
    assert_eq!(
        types,
        [
            "inuse_space",
            "resident_space",
            "swapped_space",
            "fragmentation_space"
        ]
    );
    assert_eq!(s(pb.default_sample_type), "resident_space");

    let resident = go_top(&go, &url, "resident_space", scratch.path());
    let inuse = go_top(&go, &url, "inuse_space", scratch.path());
    println!("go tool pprof -top -sample_index=resident_space {url}:\n{resident}");
    let truth = (BLOCK * BLOCKS) as f64;
    let bound = 4.0 * sampling_sd() + 1.0;
    let figure = |top: &str, site: &str| {
        cum_of(top, site).unwrap_or_else(|| panic!("{site} not named:\n{top}"))
    };
    let touched_resident = figure(&resident, "site_touched");
    let touched_inuse = figure(&inuse, "site_touched");
    let reserve_inuse = figure(&inuse, "site_reserve");
    // A reserve none of whose pages is present does not appear among the resident nodes.
    let reserve_resident = cum_of(&resident, "site_reserve").unwrap_or(0.0);
    println!(
        "truth {truth}, 4 sd {bound:.0}: site_touched resident {touched_resident}, in use \
         {touched_inuse}; site_reserve resident {reserve_resident}, in use {reserve_inuse}"
    );
    for (what, got) in [
        ("site_touched resident", touched_resident),
        ("site_touched in use", touched_inuse),
        ("site_reserve in use", reserve_inuse),
    ] {
        assert!(
            (got - truth).abs() <= bound,
            "{what}: {got}, truth {truth} ± {bound}\n{resident}\n{inuse}"
        );
    }
    // Every page a sampled block holds is present or not alike, so the touched site's resident
    // bytes are its in-use bytes; the reserve's are at most one page per block.
    assert!(
        (touched_resident - touched_inuse).abs() <= 2.0,
        "{resident}\n{inuse}"
    );
    assert!(
        reserve_resident <= 0.01 * reserve_inuse,
        "site_reserve was never written, yet {reserve_resident} of its {reserve_inuse} bytes \
         read as resident\n{resident}"
    );

    jeprof_shim::configure("rss:false").unwrap();
    let off = client::get(server.local_addr(), "/debug/pprof/rss").unwrap();
    assert_eq!(off.status, 404, "{}", off.text());
    assert!(
        off.text().contains("`rss` setting is off"),
        "{}",
        off.text()
    );
    jeprof_shim::configure("rss:true").unwrap();
    black_box((reserve, touched));
    println!("ok");
}
