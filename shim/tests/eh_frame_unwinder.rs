//! The `.eh_frame` unwinder on the real sampled path: several threads sample deep stacks while
//! another thread loads and unloads a library over and over (so the unwinder rebuilds its module
//! list under them), and every workload sample carries its whole recursion.

use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// How deep the workload recurses before allocating.
const DEPTH: u32 = 24;

#[inline(never)]
fn recurse_then_allocate(depth: u32, keep: &mut Vec<Vec<u8>>) {
    if depth == 0 {
        for i in 0..200 {
            keep.push(vec![1u8; 512 + i]);
        }
        return;
    }
    recurse_then_allocate(depth - 1, keep);
    // Not a tail call: each level keeps its frame.
    std::hint::black_box(&keep);
}

#[test]
fn eh_frame_samples_carry_whole_stacks_while_libraries_come_and_go() {
    if cfg!(not(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        target_os = "linux"
    ))) {
        return;
    }
    jeprof_shim::configure("unwinder:eh_frame,sample_rate:4096,symbolize:false,max_frames:64")
        .unwrap();
    assert_eq!(
        jeprof_shim::stats().unwinder,
        jeprof_shim::Unwinder::EhFrame
    );
    let stop = AtomicBool::new(false);
    let before = jeprof_shim::stats();
    let kept: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        s.spawn(|| {
            // Moves the loader's counters while the workers sample.
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: dlopen/dlclose of a system library without constructors that care.
                unsafe {
                    let h = libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
                    if !h.is_null() {
                        libc::dlclose(h);
                    }
                }
                std::thread::yield_now();
            }
        });
        // More workers than the unwinder's 16 rule caches, so captures also run on caches made
        // (and freed) when every pooled one is taken.
        let workers: Vec<_> = (0..20)
            .map(|_| {
                s.spawn(|| {
                    let mut keep = Vec::new();
                    for _ in 0..4 {
                        recurse_then_allocate(DEPTH, &mut keep);
                    }
                    keep
                })
            })
            .collect();
        let kept = workers.into_iter().map(|w| w.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        kept
    });
    let after = jeprof_shim::stats();
    // 20 threads × 4 × 200 blocks of 512–711 B (9.8 MB) at R = 4 KiB: about 2,400 samples.
    let taken = after.samples_taken - before.samples_taken;
    assert!(taken >= 1_500, "only {taken} samples");
    assert_eq!(after.dropped.total(), 0);

    // A workload stack repeats the recursion's one return address DEPTH − 1 times or more (the
    // return address inside `recurse_then_allocate` after its self-call); count those stacks.
    let profile = jeprof_shim::snapshot();
    let recursive = profile
        .stacks
        .iter()
        .filter(|st| {
            let mut counts = std::collections::HashMap::new();
            for f in &st.frames {
                *counts.entry(*f).or_insert(0u32) += 1;
            }
            counts.values().any(|&c| c >= DEPTH - 1)
        })
        .map(|st| st.counts.inuse.bytes)
        .sum::<f64>();
    let all = profile.totals().inuse.bytes;
    let live_blocks: usize = kept.iter().map(|k| k.len()).sum();
    println!(
        "{taken} samples; {recursive:.0} of {all:.0} live bytes in stacks with the whole recursion"
    );
    assert_eq!(live_blocks, 20 * 4 * 200);
    // The workload's blocks are nearly all the live heap (nothing of theirs was freed), and
    // every one of their samples must show the whole recursion.
    assert!(
        recursive >= 0.9 * all,
        "{recursive:.0} of {all:.0} live bytes show the recursion"
    );
}
