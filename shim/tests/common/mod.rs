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
