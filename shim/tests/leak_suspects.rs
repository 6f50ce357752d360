//! `jeprof-compat leaks` on a program with planted leaks among decoys, over seeds, at R = 64 KiB and
//! at the default 512 KiB: how often each leak is found (power) and how often a site that is not
//! leaking is flagged (false flags), beside what a two-dump `diff` of the same series flags.
//!
//! The program runs 24 steps, one dump after each, labelled ten minutes apart. Its sites:
//!
//! | site | live bytes over the steps | a leak? |
//! |---|---|---|
//! | `leak_sessions` | +2 MiB a step, 256 B objects, never freed | yes |
//! | `leak_slow` | +256 KiB a step, 4 KiB objects, never freed | yes (slow) |
//! | `warm_up_store` | +4 MiB a step for 6 steps, then unchanged | no |
//! | `cache_fill` | fills 3 MiB a step for 4 steps, then empties: a 5-step cycle | no |
//! | `burst` | 24 MiB at step 14, freed at step 16 | no |
//! | `rotating_pool` | 4 MiB, half of it replaced every step | no |
//! | `static_table` | 16 MiB from the start | no |
//!
//! Every step also allocates and frees 8 MiB of request buffers (live in no dump).

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use jeprof_compat::input::ReadPolicy;
use jeprof_compat::leaks::{find_leaks, LeakOptions};
use jeprof_compat::report::ReportOptions;
use jeprof_compat::symbolize::SymbolizeOptions;
use jeprof_shim::jeprof_dumpfmt::{self, labels, Profile, SymbolTable, WriteOptions};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const STEPS: usize = 24;
const MIB: usize = 1 << 20;
const LEAKS: [&str; 2] = ["leak_sessions", "leak_slow"];
const DECOYS: [&str; 5] = [
    "warm_up_store",
    "cache_fill",
    "burst",
    "rotating_pool",
    "static_table",
];

#[derive(Default)]
struct Heap {
    sessions: Vec<Box<[u8]>>,
    slow: Vec<Box<[u8]>>,
    store: Vec<Box<[u8]>>,
    cache: Vec<Box<[u8]>>,
    burst: Vec<Box<[u8]>>,
    pool: Vec<Box<[u8]>>,
    table: Vec<Box<[u8]>>,
}

#[inline(never)]
fn leak_sessions(heap: &mut Heap) {
    for _ in 0..2 * MIB / 256 {
        heap.sessions
            .push(black_box(vec![1u8; 256]).into_boxed_slice());
    }
}

#[inline(never)]
fn leak_slow(heap: &mut Heap) {
    for _ in 0..MIB / 4 / 4096 {
        heap.slow
            .push(black_box(vec![2u8; 4096]).into_boxed_slice());
    }
}

#[inline(never)]
fn warm_up_store(heap: &mut Heap) {
    for _ in 0..4 * MIB / 1024 {
        heap.store
            .push(black_box(vec![3u8; 1024]).into_boxed_slice());
    }
}

#[inline(never)]
fn cache_fill(heap: &mut Heap) {
    for _ in 0..3 * MIB / 512 {
        heap.cache
            .push(black_box(vec![4u8; 512]).into_boxed_slice());
    }
}

#[inline(never)]
fn burst(heap: &mut Heap) {
    for _ in 0..24 * MIB / 65536 {
        heap.burst
            .push(black_box(vec![5u8; 65536]).into_boxed_slice());
    }
}

#[inline(never)]
fn rotating_pool(heap: &mut Heap, step: usize) {
    const OBJECTS: usize = 4 * MIB / 2048;
    if heap.pool.is_empty() {
        heap.pool = (0..OBJECTS)
            .map(|_| black_box(vec![6u8; 2048]).into_boxed_slice())
            .collect();
    }
    for i in 0..OBJECTS / 2 {
        let at = (step * OBJECTS / 2 + i) % OBJECTS;
        heap.pool[at] = black_box(vec![6u8; 2048]).into_boxed_slice();
    }
}

#[inline(never)]
fn static_table(heap: &mut Heap) {
    heap.table = (0..16 * MIB / 8192)
        .map(|_| black_box(vec![7u8; 8192]).into_boxed_slice())
        .collect();
}

#[inline(never)]
fn request_buffers() {
    for i in 0..8 * MIB / 4096 {
        black_box(vec![i as u8; 4096]);
    }
}

/// One step of the program.
fn step(heap: &mut Heap, step: usize) {
    if step == 0 {
        static_table(heap);
    }
    leak_sessions(heap);
    leak_slow(heap);
    if step < 6 {
        warm_up_store(heap);
    }
    if step % 5 == 4 {
        heap.cache = Vec::new();
    } else {
        cache_fill(heap);
    }
    if step == 14 {
        burst(heap);
    }
    if step == 16 {
        heap.burst = Vec::new();
    }
    rotating_pool(heap, step);
    request_buffers();
}

/// Runs the program once, writing its dumps into `dir`, named so that their names do not sort as
/// their times (the order must come from the labels). `symbols` names every frame.
fn run(dir: &Path, symbols: &SymbolTable) -> Vec<PathBuf> {
    let mut heap = Heap::default();
    let start = 1_795_509_000i64;
    (0..STEPS)
        .map(|i| {
            step(&mut heap, i);
            let mut profile: Profile = jeprof_shim::snapshot();
            profile.symbols = Some(symbols.clone());
            let moment = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs((start + 600 * i as i64) as u64);
            labels::set(&mut profile.labels, "time", &labels::rfc3339_utc(moment));
            let path = dir.join(format!("d{}.heap", (i * 7) % STEPS + 100 * (i % 3)));
            let text = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default())
                .expect("writable");
            std::fs::write(&path, text).expect("write dump");
            path
        })
        .collect()
}

/// The symbol table of every stack the program allocates from: one run symbolized in-process,
/// so that the runs measured need no symbolization per dump.
fn symbols_of_the_program() -> SymbolTable {
    jeprof_shim::configure("symbolize:true").unwrap();
    let mut heap = Heap::default();
    for i in 0..STEPS {
        step(&mut heap, i);
    }
    let profile = jeprof_shim::snapshot();
    drop(heap);
    jeprof_shim::configure("symbolize:false").unwrap();
    profile.symbols.expect("symbolized")
}

/// Which of the program's sites a report's function name is, if any.
fn site_of(function: &str) -> Option<&'static str> {
    LEAKS
        .iter()
        .chain(DECOYS.iter())
        .chain(["request_buffers"].iter())
        .find(|site| function.ends_with(&format!("::{site}")))
        .copied()
}

struct Tally {
    runs: u32,
    found: HashMap<&'static str, u32>,
    /// Runs in which some site other than a planted leak was flagged, and how many flags in all.
    runs_with_false_flags: u32,
    false_flags: u32,
    /// Runs in which the two-dump diffs flagged a decoy.
    diff_flagged_decoys: u32,
}

fn measure(period: u64, seeds: std::ops::Range<u64>, symbols: &SymbolTable) -> Tally {
    jeprof_shim::set_sample_rate(period);
    let mut tally = Tally {
        runs: 0,
        found: HashMap::new(),
        runs_with_false_flags: 0,
        false_flags: 0,
        diff_flagged_decoys: 0,
    };
    let options = LeakOptions::default();
    let symbolize = SymbolizeOptions::default();
    let policy = ReadPolicy::default();
    for seed in seeds {
        jeprof_shim::reseed(0x1EA4_0000 + seed);
        let dir = tempfile::tempdir().unwrap();
        let paths = run(dir.path(), symbols);
        // The analysis allocates too; it is not the program measured.
        jeprof_shim::set_active(false);
        let found = find_leaks(&paths, &symbolize, &options, &policy).expect("leaks");
        if let Ok(keep) = std::env::var("LEAK_SUSPECTS_KEEP") {
            let to = Path::new(&keep).join(format!("{period}-{seed}"));
            std::fs::create_dir_all(&to).unwrap();
            for p in &paths {
                std::fs::copy(p, to.join(p.file_name().unwrap())).unwrap();
            }
        }
        tally.runs += 1;
        let mut false_here = 0;
        for suspect in found.suspects() {
            match site_of(&suspect.name) {
                Some(site) if LEAKS.contains(&site) => *tally.found.entry(site).or_default() += 1,
                _ => false_here += 1,
            }
        }
        tally.false_flags += false_here;
        tally.runs_with_false_flags += u32::from(false_here > 0);
        // What a person comparing two dumps would see: the first and the last; two late ones.
        let report = ReportOptions {
            attribution: jeprof_compat::attribution::Attribution::user_code(),
            ..ReportOptions::default()
        };
        let mut decoy_flagged = false;
        for (a, b) in [(0, STEPS - 1), (10, 18)] {
            let diff = jeprof_compat::diff::compare_files(
                &paths[a], &paths[b], false, &symbolize, &report, &policy,
            )
            .expect("diff");
            decoy_flagged |= diff.changes().any(|c| {
                c.significant()
                    && c.delta > 0.0
                    && site_of(&c.name).is_some_and(|s| DECOYS.contains(&s))
            });
        }
        tally.diff_flagged_decoys += u32::from(decoy_flagged);
        jeprof_shim::set_active(true);
    }
    tally
}

fn print(period: u64, t: &Tally) {
    let share = |n: u32| format!("{n}/{} ({:.0}%)", t.runs, 100.0 * n as f64 / t.runs as f64);
    println!("R = {} KiB over {} seeds:", period >> 10, t.runs);
    for leak in LEAKS {
        println!(
            "  {leak}: found in {}",
            share(t.found.get(leak).copied().unwrap_or(0))
        );
    }
    println!(
        "  runs with a false flag: {} ({} flags in all)",
        share(t.runs_with_false_flags),
        t.false_flags
    );
    println!(
        "  runs in which diff (dumps 1 and 24, 11 and 19) flags a decoy as grown: {}",
        share(t.diff_flagged_decoys)
    );
}

#[test]
fn planted_leaks_are_found_decoys_are_not_and_a_two_dump_diff_flags_the_decoys() {
    let symbols = symbols_of_the_program();
    const SEEDS: u64 = 20;
    let fine = measure(64 << 10, 0..SEEDS, &symbols);
    print(64 << 10, &fine);
    let default = measure(512 << 10, 100..100 + SEEDS, &symbols);
    print(512 << 10, &default);
    let found = |t: &Tally, leak: &str| t.found.get(leak).copied().unwrap_or(0);

    // At 64 KiB both leaks add tens of samples a step: found in every run but a rare one.
    assert!(
        found(&fine, "leak_sessions") >= 18,
        "leak_sessions at 64 KiB"
    );
    assert!(found(&fine, "leak_slow") >= 17, "leak_slow at 64 KiB");
    // At 512 KiB the fast leak adds four samples a step and still shows; the slow one adds half a
    // sample a step, which no test can tell from noise over a 12-step window: it is rarely found,
    // and that is the honest answer (a lower period, or dumps over a longer time, find it).
    assert!(
        found(&default, "leak_sessions") >= 17,
        "leak_sessions at 512 KiB"
    );
    // False flags: the rate is held at 5% of the discoveries; with about two true discoveries a
    // run, more than two runs of 20 with a false flag would be far outside it.
    for t in [&fine, &default] {
        assert!(
            t.runs_with_false_flags <= 2,
            "false flags in {} runs",
            t.runs_with_false_flags
        );
    }
    // The warm-up store grew 24 MiB between dumps 1 and 24: a two-dump diff flags it every time.
    assert_eq!(fine.diff_flagged_decoys, fine.runs);
    assert_eq!(default.diff_flagged_decoys, default.runs);
}
