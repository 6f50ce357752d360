//! A dump with residency figures (`# rss_*` annotations) for the tests of the views that show
//! them: `report --rss`, `export`, the page.
#![allow(dead_code)]

use std::path::Path;

use jeprof_dumpfmt::allocator::{AllocatorFigures, JemallocFigures};
use jeprof_dumpfmt::rss::{ByteEstimate, RssFigures, SiteRss, SlabClass, SlabFigures};
use jeprof_dumpfmt::WriteOptions;

pub const BASE: u64 = 0x40_0000;

/// A dump of three stacks (fn_1 ← fn_2, fn_3 ← fn_2, fn_4 ← fn_2), with residency figures
/// (`jemalloc`: with slab figures) or none.
pub fn write_dump(path: &Path, rss: Option<bool>) {
    let mut profile = crate::common::generated_profile(
        &[
            (vec![1, 2], 10.0, 40_000.0),
            (vec![3, 2], 5.0, 9_000.0),
            (vec![4, 2], 2.0, 1_000.0),
        ],
        // Small enough that every stack holds more than 2·R, which the dump encodes closely.
        256,
        BASE,
    );
    let jemalloc = rss == Some(true);
    let allocator = AllocatorFigures {
        jemalloc: jemalloc.then_some(JemallocFigures {
            allocated: 60_000,
            active: 80_000,
            resident: 90_000,
            mapped: 100_000,
            retained: 0,
            metadata: 4_000,
        }),
        profiler: 2_000,
        rss_anon: Some(200_000),
        rss_file: Some(10_000),
    };
    profile.annotations = allocator.to_annotations();
    if let Some(jemalloc) = rss {
        let frames = |f: &[u64]| f.iter().map(|&x| BASE + 0x100 * x).collect::<Vec<u64>>();
        let e = |bytes: f64| ByteEstimate {
            bytes,
            variance: bytes * 10.0,
        };
        let stranded = |bytes: f64| jemalloc.then(|| e(bytes));
        let figures = RssFigures {
            page_size: 4096,
            pagemap: Ok(()),
            sites: vec![
                SiteRss {
                    frames: frames(&[1, 2]),
                    resident: e(0.0),
                    swapped: e(0.0),
                    stranded: stranded(0.0),
                },
                SiteRss {
                    frames: frames(&[3, 2]),
                    resident: e(8_000.0),
                    swapped: e(500.0),
                    stranded: stranded(3_000.0),
                },
                SiteRss {
                    frames: frames(&[4, 2]),
                    resident: e(1_000.0),
                    swapped: e(0.0),
                    stranded: stranded(700.0),
                },
            ],
            slabs: jemalloc.then(|| SlabFigures {
                classes: vec![SlabClass {
                    size: 64,
                    nregs: 64,
                    slab_size: 4096,
                    curregs: 100,
                    curslabs: 2,
                    nonfull_slabs: 2,
                    sampled_regions: 3,
                }],
                dirty_bytes: 8192,
                muzzy_bytes: 0,
            }),
        };
        profile.annotations.extend(figures.to_annotations());
    }
    jeprof_dumpfmt::write::write_file(&profile, path, &WriteOptions::default()).unwrap();
}
