//! Measures how close jeprof's figures come to the truth for dumps written by this crate, against
//! jemalloc's plain rounding, over a grid of stacks that no fixture could cover one by one.
//!
//! `cargo run --release -p jeprof-dumpfmt --example rounding_grid`
//!
//! Stacks are arbitrary (objects, bytes) pairs at R = 512 KiB with average object sizes from 8 B to
//! 8 MiB and sizes from 2·R to 8192·R: what merged fleet profiles hold (a stack made of a few samples
//! is exactly representable and would flatter the figures). Rows group stacks by `n_c`, the real
//! object count jemalloc's change of variables writes (about the stack's size in units of R for small
//! objects); the error is `max(|C' − C|/C, |S' − S|/S)` of jeprof's computed objects C' and bytes S'.
use jeprof_dumpfmt::encode::{encode_pair, relative_error, Rounding};

fn main() {
    let r: u64 = 1 << 19;
    // (worst jemalloc rounding, worst ours at R, worst ours at R/16, cases)
    let mut buckets: std::collections::BTreeMap<u64, (f64, f64, f64, usize)> = Default::default();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let started = std::time::Instant::now();
    let cases = 100_000;
    for _ in 0..cases {
        let size = 8.0 * 2f64.powf(uniform() * 20.0);
        let bytes = r as f64 * 2f64.powf(1.0 + uniform() * 12.0);
        let objects = bytes / size;
        let n_c = jeprof_dumpfmt::math::encode(objects, bytes, r as f64).0;
        let bucket = if n_c < 8.0 {
            n_c.floor() as u64
        } else {
            8 * (n_c / 8.0).log2().floor().exp2() as u64
        };
        let error = |period: u64, rounding| {
            let pairs = encode_pair(objects, bytes, period, rounding);
            relative_error(&pairs, objects, bytes, period)
        };
        let e = buckets.entry(bucket).or_default();
        e.0 = e.0.max(error(r, Rounding::Nearest));
        e.1 = e.1.max(error(r, Rounding::Optimal));
        e.2 = e.2.max(error(r / 16, Rounding::Optimal));
        e.3 += 1;
    }
    let per_case = started.elapsed() / (3 * cases);
    println!("worst relative error of jeprof's objects/bytes per stack (stacks of at least 2·R)");
    println!(
        "{:>10} {:>8} {:>14} {:>14} {:>14}",
        "n_c", "stacks", "jemalloc", "ours at R", "ours at R/16"
    );
    for (bucket, (near, ours, ours16, count)) in buckets {
        let label = if bucket < 8 {
            format!("[{bucket}, {})", bucket + 1)
        } else {
            format!("[{bucket}, {})", bucket * 2)
        };
        println!("{label:>10} {count:>8} {near:>14.2e} {ours:>14.2e} {ours16:>14.2e}");
    }
    println!("mean encoding time per stack: {per_case:?}");
}
