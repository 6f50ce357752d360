//! Probe: worst relative error of jeprof's figures, ours vs jemalloc's rounding, by n_c bucket.
use jeprof_dumpfmt::encode::{encode_pair, relative_error, Rounding};
fn main() {
    let r: u64 = 1 << 19;
    let mut buckets = std::collections::BTreeMap::new();
    let mut seed = 88172645463325252u64;
    for _ in 0..200000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let z = 8.0 * (2f64).powf((seed % 10000) as f64 / 10000.0 * 20.0);
        let bytes = r as f64 * (2f64).powf(1.0 + ((seed >> 16) % 10000) as f64 / 10000.0 * 12.0);
        let objects = bytes / z;
        let nc = jeprof_dumpfmt::math::encode(objects, bytes, r as f64).0;
        let key = if nc < 16.0 {
            nc.floor() as u64
        } else {
            16 * (nc / 16.0).log2().floor().exp2() as u64
        };
        let hdr = std::env::var("HDR_SHIFT")
            .map(|v| r >> v.parse::<u32>().unwrap())
            .unwrap_or(r);
        let o = encode_pair(objects, bytes, hdr, Rounding::Optimal);
        let n = encode_pair(objects, bytes, r, Rounding::Nearest);
        let e = buckets
            .entry(key)
            .or_insert((0.0f64, 0.0f64, 0usize, 0usize));
        e.0 = e.0.max(relative_error(&o, objects, bytes, hdr));
        e.1 = e.1.max(relative_error(&n, objects, bytes, r));
        e.2 += 1;
        e.3 = e.3.max(o.len());
    }
    for (k, (o, n, c, l)) in buckets {
        println!("n_c>={k:6}: optimal {o:.2e} nearest {n:.2e} (cases {c}, max entries {l})");
    }
}
