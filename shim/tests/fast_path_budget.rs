//! The fast path's instructions per call, counted by callgrind (never timed), against a budget
//! written here: what `Profiled<Jemalloc>` adds to jemalloc's own `alloc`, `dealloc` and an
//! unsampled `realloc`, the three calls every allocation of a profiled program makes. A change
//! that puts a load, a branch or a call on that path shows here as instructions per call, in a
//! figure that does not depend on the machine's load.
//!
//! The test re-runs itself under `valgrind --tool=callgrind` as a child that calls, [`CALLS`]
//! times each, one `#[inline(never)]` wrapper per allocator and operation (`jemalloc_alloc` and
//! `shim_alloc`, ...): both call the same jemalloc, one directly and one through
//! `Profiled`, so the difference of their inclusive counts (`callgrind_annotate --inclusive=yes`)
//! over the calls is the fast path's instructions per call. Sampling is off in the child (R = 0:
//! the countdown still runs on every call, and rechecks the settings every 64 MiB, which the
//! child never reaches), so no call takes the slow path: a sample's cost is the churn bench's
//! figure, not this one. The counts are those of this build (the test profile, opt-level 1 for the
//! workspace's crates); a release build's are lower (`bench/RESULTS.md`, the fast path in machine
//! code).
//!
//! Needs `valgrind` (Debian's package, which `.ci/run` installs): under `CI=true` its absence
//! fails the test.

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::path::Path;
use std::process::Command;

use jeprof_shim::Profiled;
use tikv_jemallocator::Jemalloc;

/// Set in the child: run the calls.
const CHILD: &str = "JEPROF_SHIM_TEST_FAST_PATH_CHILD";
/// Calls per wrapper. Enough that the wrappers' first calls (a cache bin's refill) are noise.
const CALLS: u64 = 50_000;

/// The most instructions the fast path may add per call, at this build's optimisation level:
/// `(operation, budget)`. What it adds is the countdown's subtract and branch (alloc), the range
/// compare (dealloc), and both (realloc); measured at the test profile when this test was written
/// (two runs): alloc +3.3, dealloc +6.7, realloc +10.1 and +11.0 (jemalloc's own path varies by a
/// few instructions between runs, with its caches' state). The budgets leave about half as much
/// again: less than one more load and branch on each path.
const BUDGETS: [(&str, f64); 3] = [("alloc", 6.0), ("dealloc", 10.0), ("realloc", 15.0)];

static JEMALLOC: Jemalloc = Jemalloc;
static SHIM: Profiled<Jemalloc> = Profiled::new(Jemalloc);

/// One wrapper per allocator and operation, named for them, so that callgrind counts each on its
/// own (the instances of one generic function would share a name).
macro_rules! wrappers {
    ($($alloc_name:ident, $dealloc_name:ident, $realloc_name:ident: $a:expr;)*) => {$(
        #[inline(never)]
        fn $alloc_name(layout: Layout) -> *mut u8 {
            // SAFETY: the layout has a non-zero size (the caller's).
            unsafe { $a.alloc(black_box(layout)) }
        }
        #[inline(never)]
        fn $dealloc_name(ptr: *mut u8, layout: Layout) {
            // SAFETY: ptr came from this allocator's alloc or realloc with this layout.
            unsafe { $a.dealloc(black_box(ptr), black_box(layout)) }
        }
        #[inline(never)]
        fn $realloc_name(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: ptr came from this allocator with this layout; new_size is not zero.
            unsafe { $a.realloc(black_box(ptr), black_box(layout), black_box(new_size)) }
        }
    )*};
}

wrappers! {
    jemalloc_alloc, jemalloc_dealloc, jemalloc_realloc: JEMALLOC;
    shim_alloc, shim_dealloc, shim_realloc: SHIM;
}

/// `CALLS` alloc–dealloc pairs of 64 bytes, then `CALLS` reallocations between 50 and 60 bytes
/// (one size class: jemalloc keeps the block in place), through the given wrappers.
fn calls(
    alloc: fn(Layout) -> *mut u8,
    dealloc: fn(*mut u8, Layout),
    realloc: fn(*mut u8, Layout, usize) -> *mut u8,
) {
    let layout = Layout::from_size_align(64, 8).unwrap();
    for _ in 0..CALLS {
        let p = alloc(layout);
        assert!(!p.is_null());
        dealloc(p, layout);
    }
    let small = Layout::from_size_align(50, 8).unwrap();
    let mut p = alloc(small);
    let mut size = 50;
    for _ in 0..CALLS {
        let new_size = if size == 50 { 60 } else { 50 };
        p = realloc(p, Layout::from_size_align(size, 8).unwrap(), new_size);
        assert!(!p.is_null());
        size = new_size;
    }
    dealloc(p, Layout::from_size_align(size, 8).unwrap());
}

fn child() {
    // Sampling off, and this thread's first slow-path visit (which reads the settings) made here,
    // outside the wrappers.
    jeprof_shim::set_sample_rate(0);
    let layout = Layout::from_size_align(64, 8).unwrap();
    for _ in 0..1000 {
        // SAFETY: a non-zero size; freed with the same layout.
        unsafe { SHIM.dealloc(SHIM.alloc(layout), layout) };
    }
    calls(jemalloc_alloc, jemalloc_dealloc, jemalloc_realloc);
    calls(shim_alloc, shim_dealloc, shim_realloc);
}

/// Each wrapper's inclusive instruction count from `callgrind_annotate --inclusive=yes`, by its
/// name (`shim_alloc`, ...).
fn inclusive_counts(annotated: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for line in annotated.lines() {
        let Some(count) = line.split_whitespace().next() else {
            continue;
        };
        let Ok(count) = count.replace(',', "").parse::<u64>() else {
            continue;
        };
        for name in [
            "jemalloc_alloc",
            "jemalloc_dealloc",
            "jemalloc_realloc",
            "shim_alloc",
            "shim_dealloc",
            "shim_realloc",
        ] {
            if line.contains(&format!("fast_path_budget::{name} ")) {
                out.push((name.to_string(), count));
            }
        }
    }
    out
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let Some(valgrind) = jeprof_conformance::require_valgrind() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("callgrind.out");
    let me = std::env::current_exe().unwrap();
    let run = Command::new(&valgrind)
        .args(["--tool=callgrind", "--quiet"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&me)
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "callgrind run failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let annotate = Command::new(Path::new(&valgrind).with_file_name("callgrind_annotate"))
        .args(["--inclusive=yes", "--threshold=100"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(annotate.status.success(), "callgrind_annotate failed");
    let annotated = String::from_utf8_lossy(&annotate.stdout);
    let counts = inclusive_counts(&annotated);
    let count = |name: &str| {
        counts
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, c)| c)
            .unwrap_or_else(|| panic!("no count for {name} in:\n{annotated}"))
    };
    let mut over = Vec::new();
    for (operation, budget) in BUDGETS {
        let (jemalloc, shim) = (
            count(&format!("jemalloc_{operation}")),
            count(&format!("shim_{operation}")),
        );
        // Every wrapper ran CALLS times, and alloc and dealloc once more around the reallocations.
        let calls = if operation == "realloc" {
            CALLS
        } else {
            CALLS + 1
        };
        let added = (shim as f64 - jemalloc as f64) / calls as f64;
        println!(
            "{operation}: jemalloc {:.1} instructions a call, through Profiled {:.1}: +{added:.2} \
             (budget {budget})",
            jemalloc as f64 / calls as f64,
            shim as f64 / calls as f64
        );
        if added > budget {
            over.push(format!("{operation} +{added:.2} > {budget}"));
        }
    }
    assert!(
        over.is_empty(),
        "the fast path is over its budget: {over:?}"
    );
    println!("test the_fast_path_adds_at_most_its_budget_of_instructions_per_call ... ok");
}
