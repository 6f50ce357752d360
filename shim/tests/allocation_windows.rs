//! A window's profile matches the truth of a workload that allocates and frees known amounts
//! inside it: what was allocated before it is absent, what was allocated in it is its `accum`,
//! what of that is still live at the stop is its `inuse` (each within its 95% interval), the
//! lifetimes are consistent, and an overlapping window sees only what followed its own start.

use std::hint::black_box;

use jeprof_shim::jeprof_dumpfmt::{model::symbol_key, Estimate, Profile};
use jeprof_shim::{StackLifetimes, WindowProfile};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// 1 KiB blocks: jemalloc's size class is the size, so the truth in bytes is exact.
const BLOCK: usize = 1024;
const BEFORE: usize = 4_000;
const INSIDE: usize = 8_000;

#[inline(never)]
fn site_before() -> Vec<u8> {
    vec![1u8; BLOCK]
}

#[inline(never)]
fn site_inside() -> Vec<u8> {
    vec![2u8; BLOCK]
}

/// (accum, inuse, lifetimes summed) of the stacks whose frames name `site`.
fn figures(window: &WindowProfile, site: &str) -> (Estimate, Estimate, StackLifetimes) {
    let profile: &Profile = &window.profile;
    let symbols = profile.symbols.as_ref().expect("symbolized");
    let mut out = (
        Estimate::default(),
        Estimate::default(),
        StackLifetimes::default(),
    );
    for (stack, life) in profile.stacks.iter().zip(&window.lifetimes) {
        let named = stack.frames.iter().enumerate().any(|(i, &f)| {
            symbols
                .names
                .get(&symbol_key(i, f))
                .is_some_and(|names| names.iter().any(|n| n.ends_with(&format!("::{site}"))))
        });
        if named {
            out.0.add(&stack.counts.accum);
            out.1.add(&stack.counts.inuse);
            out.2.samples += life.samples;
            out.2.freed_samples += life.freed_samples;
            out.2.still_live_samples += life.still_live_samples;
            if let (Some(min), Some(mean), Some(max)) = (life.min, life.mean, life.max) {
                assert!(min <= mean && mean <= max, "{life:?}");
            }
            assert_eq!(
                life.still_live_samples,
                life.samples - life.freed_samples,
                "{life:?}"
            );
            assert_eq!(
                life.still_live_min_age.is_some(),
                life.still_live_samples > 0
            );
        }
    }
    out
}

fn assert_covers(what: &str, e: &Estimate, truth: f64) {
    let (lo, hi) = e.bytes_interval_95();
    println!(
        "{what}: estimate {:.0} [{lo:.0}, {hi:.0}], truth {truth}",
        e.bytes
    );
    assert!(lo <= truth && truth <= hi, "{what}: {e:?} vs {truth}");
}

#[test]
fn a_windows_profile_matches_what_was_allocated_and_freed_inside_it() {
    // R = 4 KiB: each 1 KiB block is sampled with probability 0.22, about 1,800 samples of
    // site_inside. A seed makes the run reproducible.
    jeprof_shim::configure("sample_rate:4096,seed:11").unwrap();
    let before: Vec<Vec<u8>> = (0..BEFORE).map(|_| site_before()).collect();

    let outer = jeprof_shim::start_allocation_profile();
    let mut first_half: Vec<Vec<u8>> = (0..INSIDE / 2).map(|_| site_inside()).collect();
    let inner = jeprof_shim::start_allocation_profile();
    let mut second_half: Vec<Vec<u8>> = (0..INSIDE / 2).map(|_| site_inside()).collect();
    // Free every other block of both halves inside both windows, and half of what was
    // allocated before (not the windows' business).
    let keep_odd = |v: &mut Vec<Vec<u8>>| {
        let mut i = 0;
        v.retain(|_| {
            i += 1;
            i % 2 == 0
        });
    };
    keep_odd(&mut first_half);
    keep_odd(&mut second_half);
    let mut before = before;
    keep_odd(&mut before);
    let inner = inner.stop();
    let outer = outer.stop();
    black_box((&before, &first_half, &second_half));

    let block = BLOCK as f64;
    let (accum, inuse, life) = figures(&outer, "site_inside");
    assert_covers("outer accum", &accum, INSIDE as f64 * block);
    assert_covers("outer inuse", &inuse, (INSIDE / 2) as f64 * block);
    assert!(
        life.freed_samples > 0 && life.still_live_samples > 0,
        "{life:?}"
    );
    let (accum, inuse, _) = figures(&outer, "site_before");
    assert!(accum.is_zero() && inuse.is_zero(), "site_before: {accum:?}");

    let (accum, inuse, life) = figures(&inner, "site_inside");
    assert_covers("inner accum", &accum, (INSIDE / 2) as f64 * block);
    assert_covers("inner inuse", &inuse, (INSIDE / 4) as f64 * block);
    assert!(life.samples < figures(&outer, "site_inside").2.samples);

    let untracked = |w: &WindowProfile| {
        w.profile
            .annotations
            .iter()
            .find(|(k, _)| k == "shim_window_untracked_samples")
            .map(|(_, v)| v.clone())
    };
    assert_eq!(outer.untracked_samples, 0);
    assert_eq!(untracked(&outer).as_deref(), Some("0"));
    // Monotonic clock: the outer window contains the inner one.
    assert!(outer.duration >= inner.duration);
    outer.profile.validate().unwrap();

    // With no window open, frees and samples are not tracked any more (and do not fail).
    drop(first_half);
    drop(second_half);
    let empty = jeprof_shim::start_allocation_profile().stop();
    assert!(empty
        .profile
        .stacks
        .iter()
        .all(|s| s.counts.inuse.is_zero()));
}
