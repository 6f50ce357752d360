//! Shared by the integration tests: a workload with known live bytes per call site, and the
//! attribution of a profile's stacks to those sites.
#![allow(dead_code)]

use std::collections::HashMap;
use std::hint::black_box;

use jeprof_shim::jeprof_dumpfmt::{model::symbol_key, Estimate, Profile};

/// The call sites and the bytes each keeps live: 1,000,000 × 8 B, 2,000 × 4 KiB, 1 × 8 MiB.
pub const SITES: [(&str, f64); 3] = [
    ("site_small", 8_000_000.0),
    ("site_page", 2_000.0 * 4096.0),
    ("site_huge", 8_388_608.0),
];

/// What the workload keeps alive. The boxes are the point: one 8-byte allocation each.
#[allow(clippy::vec_box)]
pub struct Live {
    pub small: Vec<Box<u64>>,
    pub pages: Vec<Vec<u8>>,
    pub huge: Vec<u8>,
}

#[inline(never)]
pub fn site_small(i: u64) -> Box<u64> {
    Box::new(black_box(i))
}

#[inline(never)]
pub fn site_page() -> Vec<u8> {
    vec![1u8; 4096]
}

#[inline(never)]
pub fn site_huge() -> Vec<u8> {
    vec![2u8; 8 << 20]
}

/// Allocates and frees `n` blocks of 16–4096 bytes: moves the sampler, leaves nothing live.
#[inline(never)]
pub fn churn(n: usize) {
    for i in 0..n {
        let v: Vec<u8> = Vec::with_capacity(16 + (i * 2_654_435_761) % 4081);
        black_box(&v);
    }
}

/// Runs the workload, interleaving the sites with churn.
pub fn run(churn_per_round: usize) -> Live {
    let mut small = Vec::with_capacity(1_000_000);
    let mut pages = Vec::with_capacity(2_000);
    let mut huge = Vec::new();
    for round in 0..100u64 {
        for i in 0..10_000 {
            small.push(site_small(round * 10_000 + i));
        }
        for _ in 0..20 {
            pages.push(site_page());
        }
        if round == 50 {
            huge = site_huge();
        }
        churn(churn_per_round);
    }
    Live { small, pages, huge }
}

/// Caches, per frame key, which site (if any) the address belongs to.
#[derive(Default)]
pub struct Attributor {
    cache: HashMap<u64, Option<usize>>,
}

impl Attributor {
    /// The site a stack belongs to (by resolving its frames in-process), if any.
    pub fn site_of(&mut self, frames: &[u64]) -> Option<usize> {
        for (i, &frame) in frames.iter().enumerate() {
            let key = symbol_key(i, frame);
            let site = *self.cache.entry(key).or_insert_with(|| {
                let mut names = Vec::new();
                backtrace::resolve(key.wrapping_add(1) as usize as *mut std::ffi::c_void, |s| {
                    if let Some(n) = s.name() {
                        names.push(format!("{n:#}"));
                    }
                });
                site_in_names(&names)
            });
            if site.is_some() {
                return site;
            }
        }
        None
    }
}

/// The site whose function name appears in `names`.
pub fn site_in_names(names: &[String]) -> Option<usize> {
    SITES
        .iter()
        .position(|(site, _)| names.iter().any(|n| n.ends_with(&format!("::{site}"))))
}

/// In-use estimate per site, from the profile's own symbol table when it has one, else by
/// resolving in-process.
pub fn per_site(profile: &Profile, attributor: &mut Attributor) -> [Estimate; 3] {
    let mut out = [Estimate::default(); 3];
    for stack in &profile.stacks {
        let site = match &profile.symbols {
            Some(symbols) => stack.frames.iter().enumerate().find_map(|(i, &f)| {
                symbols
                    .names
                    .get(&symbol_key(i, f))
                    .and_then(|n| site_in_names(n))
            }),
            None => attributor.site_of(&stack.frames),
        };
        if let Some(site) = site {
            out[site].add(&stack.counts.inuse);
        }
    }
    out
}

/// Per site, what [`estimates_over_seeds`] added up.
pub struct OverSeeds {
    /// Runs (one per seed).
    pub seeds: u64,
    /// Sum of the in-use byte estimates.
    pub sums: [f64; 3],
    /// Runs whose 95% interval covered the truth.
    pub covered: [u32; 3],
}

impl OverSeeds {
    /// The mean estimate of site `i` relative to its truth, less one.
    pub fn relative_error(&self, i: usize) -> f64 {
        self.sums[i] / self.seeds as f64 / SITES[i].1 - 1.0
    }

    /// Fails unless the mean estimate of each of `sites` is within `bound` (relative) of the truth.
    pub fn assert_means_within(&self, sites: &[usize], bound: f64) {
        for &i in sites {
            let (site, truth) = SITES[i];
            let mean = self.sums[i] / self.seeds as f64;
            println!(
                "{site}: mean {mean:.0} truth {truth:.0} ({:+.2}%), covered {}/{}",
                self.relative_error(i) * 100.0,
                self.covered[i],
                self.seeds
            );
            assert!(
                self.relative_error(i).abs() < bound,
                "{site}: mean estimate {mean} vs truth {truth}"
            );
        }
    }
}

/// Runs the workload ([`run`] with `churn_per_round`) once per seed at mean period `period`, with
/// stacks resolved in-process, and adds up each site's in-use estimate and whether its 95%
/// interval covered the truth. The 8 MiB site is sampled with p = 1 − e^(−8 MiB/R), which is 1 in
/// f64 for every R up to 16 KiB, so it must be exact in every run; no sample may be dropped.
pub fn estimates_over_seeds(period: u64, seeds: u64, churn_per_round: usize) -> OverSeeds {
    jeprof_shim::configure("symbolize:false").unwrap();
    jeprof_shim::set_sample_rate(period);
    let mut attributor = Attributor::default();
    let mut over = OverSeeds {
        seeds,
        sums: [0.0; 3],
        covered: [0; 3],
    };
    for seed in 0..seeds {
        jeprof_shim::reseed(0x5EED_0000 + seed);
        let live = run(churn_per_round);
        let profile = jeprof_shim::snapshot();
        assert_eq!(profile.sample_period, period);
        let estimates = per_site(&profile, &mut attributor);
        for (i, (_, truth)) in SITES.iter().enumerate() {
            over.sums[i] += estimates[i].bytes;
            let (lo, hi) = estimates[i].bytes_interval_95();
            if lo <= *truth && *truth <= hi {
                over.covered[i] += 1;
            }
        }
        assert_eq!(estimates[2].bytes, SITES[2].1, "seed {seed}");
        drop(live);
    }
    let stats = jeprof_shim::stats();
    assert_eq!(stats.dropped.total(), 0, "{stats:?}");
    over
}

/// The period of the tests of the shim in front of other allocators. At R = 4 KiB one run's
/// relative standard deviation is √(R/8 MB) ≈ 2.3% for the 8-byte site (an object of size s
/// sampled with p = 1 − e^(−s/R) has variance s²(1 − p)/p ≈ sR) and √((1 − p)/(2,000 p)) ≈ 1.7%
/// for the 4 KiB pages (p = 1 − e^(−1)), so the mean of [`ANY_ALLOCATOR_SEEDS`] runs has standard
/// errors of 0.46% and 0.35%: the 2% bound is more than 4 of them wide.
pub const ANY_ALLOCATOR_PERIOD: u64 = 4096;

/// Runs of the tests of the shim in front of other allocators.
pub const ANY_ALLOCATOR_SEEDS: u64 = 24;

/// The mean estimate of the 8-byte and the page site within 2% of the truth over 24 seeds, in
/// front of whatever the test's global allocator wraps (little churn: it only moves the sampler).
pub fn assert_two_sites_unbiased_over_seeds() {
    estimates_over_seeds(ANY_ALLOCATOR_PERIOD, ANY_ALLOCATOR_SEEDS, 10)
        .assert_means_within(&[0, 1], 0.02);
}

/// `alloc`'s figures for `label`: live bytes, live blocks, bytes allocated since start.
fn exact_figures(label: &str) -> Option<(i64, i64, u64)> {
    jeprof_shim::exact_scopes()
        .into_iter()
        .find(|s| s.label == label)
        .map(|s| (s.live_bytes, s.live_objects, s.allocated_bytes))
}

/// For `alloc`, the test's global [`jeprof_shim::ExactScopes`] over a `Profiled<A>`: 4 threads,
/// each in a scope of its own, allocate 300 blocks of 1–6,000 bytes and alignments 1–4,096 (some
/// of them sampled: R = 4 KiB); every other block then grows threefold in another scope, and all
/// are freed by this thread in no scope. Each scope's exact figures equal what it allocated, the
/// growth included, and its live figures return to zero.
pub fn assert_exact_scopes_equal_the_truth<A: std::alloc::GlobalAlloc + Sync>(alloc: &'static A) {
    use std::alloc::Layout;
    const THREADS: usize = 4;
    const BLOCKS: usize = 300;
    jeprof_shim::configure("symbolize:false").unwrap();
    jeprof_shim::set_sample_rate(ANY_ALLOCATOR_PERIOD);
    let samples_before = jeprof_shim::stats().samples_taken;
    let label = |t: usize| format!("any-allocator-{t}");
    let layout_of = |t: usize, k: usize| {
        let size = 1 + (t * 7_919 + k * 104_729) % 6_000;
        Layout::from_size_align(size, 1 << ((t + k) % 13)).unwrap()
    };
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let scope = jeprof_shim::Scope::new(&label(t));
                // Allocated before the scope is entered: the scope holds only the blocks.
                let mut blocks = Vec::with_capacity(BLOCKS);
                let _in_scope = scope.enter();
                for k in 0..BLOCKS {
                    let layout = layout_of(t, k);
                    // SAFETY: the size is at least 1.
                    let ptr = unsafe { alloc.alloc(layout) };
                    assert!(!ptr.is_null() && (ptr as usize).is_multiple_of(layout.align()));
                    // SAFETY: ptr is valid for layout.size() bytes.
                    unsafe { ptr.write_bytes(t as u8, layout.size()) };
                    blocks.push((ptr as usize, layout));
                }
                blocks
            })
        })
        .collect();
    let mut blocks: Vec<Vec<(usize, Layout)>> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Per scope: live bytes, live blocks, bytes allocated.
    let mut truth = [(0i64, 0i64, 0u64); THREADS];
    for (t, blocks) in blocks.iter_mut().enumerate() {
        let other = jeprof_shim::Scope::new(&label((t + 1) % THREADS));
        let _in_other = other.enter();
        for (k, (ptr, layout)) in blocks.iter_mut().enumerate() {
            truth[t].2 += layout.size() as u64;
            if k % 2 == 0 {
                let grown = Layout::from_size_align(layout.size() * 3, layout.align()).unwrap();
                // SAFETY: ptr was allocated with layout; the new size is non-zero.
                let new = unsafe { alloc.realloc(*ptr as *mut u8, *layout, grown.size()) };
                assert!(!new.is_null() && (new as usize).is_multiple_of(grown.align()));
                // SAFETY: the old bytes were copied.
                assert_eq!(unsafe { new.read() }, t as u8);
                truth[t].2 += (grown.size() - layout.size()) as u64;
                (*ptr, *layout) = (new as usize, grown);
            }
            truth[t].0 += layout.size() as i64;
            truth[t].1 += 1;
        }
    }
    for (t, truth) in truth.iter().enumerate() {
        assert_eq!(exact_figures(&label(t)), Some(*truth), "{}", label(t));
    }
    assert!(
        jeprof_shim::stats().samples_taken > samples_before,
        "no block was sampled"
    );
    for (ptr, layout) in blocks.into_iter().flatten() {
        // SAFETY: allocated (or reallocated) with this layout, freed once.
        unsafe { alloc.dealloc(ptr as *mut u8, layout) };
    }
    for (t, truth) in truth.iter().enumerate() {
        assert_eq!(
            exact_figures(&label(t)),
            Some((0, 0, truth.2)),
            "{}",
            label(t)
        );
    }
}
