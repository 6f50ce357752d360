//! The shim in front of an allocator other than jemalloc: here mimalloc; `std::alloc::System`
//! works the same way. Unsampled blocks come from mimalloc; the sampled ones (one in about
//! R bytes) from the shim's own jemalloc arena, which is all that jemalloc holds in this process.
//!
//! ```text
//! cargo run --example any_allocator -p jeprof-shim
//! jeprof --text <the dump it names>
//! ```

use std::hint::black_box;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<mimalloc::MiMalloc> =
    jeprof_shim::Profiled::new(mimalloc::MiMalloc);

/// Records kept live: 100,000 × 256 bytes.
const RECORDS: usize = 100_000;

/// One record: the call site the profile charges them to.
#[inline(never)]
fn record(i: usize) -> Vec<u8> {
    vec![black_box(i as u8); 256]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // R = 64 KiB rather than the default 512 KiB, so that a heap of 25 MB gets intervals of a
    // few percent (they widen as √R).
    jeprof_shim::configure("sample_rate:65536")?;
    let records: Vec<Vec<u8>> = (0..RECORDS).map(record).collect();

    let profile = jeprof_shim::snapshot();
    let live = profile.totals().inuse;
    let (low, high) = live.bytes_interval_95();
    let allocator = profile
        .annotations
        .iter()
        .find(|(key, _)| key == "allocator")
        .map_or("-", |(_, value)| value.as_str());
    let stats = jeprof_shim::stats();
    println!(
        "live ≈{:.0} bytes, 95% interval {low:.0}–{high:.0} (the records alone: {} bytes); \
         allocator: {allocator}; {} samples in the sampled arena ({} bytes of it in use)",
        live.bytes,
        RECORDS * 256,
        stats.live_samples,
        stats.arena_bytes_used,
    );

    let path = std::env::temp_dir().join(format!("any-allocator-{}.heap", std::process::id()));
    jeprof_shim::dump(&path)?;
    println!("jeprof --text {}", path.display());
    drop(records);
    Ok(())
}
