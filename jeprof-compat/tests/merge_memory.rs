//! A merge's peak memory follows the distinct stacks, not the number of dumps: four times as many
//! dumps over the same distinct stacks peak within a small allowance of the smaller merge, where a
//! merge that held its dumps (or their parsed stacks) would add at least their size on disk.
//!
//! Each merge runs in a child process (this test binary again, told what to do by an environment
//! variable), which merges the dumps a list names, as `merge --inputs-from` does, and prints its
//! resident high-water mark (`VmHWM`, from `/proc/self/status`). The child uses jemalloc, as the
//! `jeprof-compat` binary does.
#![cfg(target_os = "linux")]

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use jeprof_compat::merge::{self, Input};
use jeprof_compat::{ReadPolicy, SymbolizeOptions};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The list the child merges, when this process is the child.
const CHILD_LIST: &str = "JEPROF_COMPAT_TEST_MERGE_LIST";

/// Dumps in the smaller merge; the larger merges four times as many.
const DUMPS: usize = 150;

/// Distinct stacks of the fleet; each dump holds `STACKS_PER_DUMP` of them, so after a few dozen
/// dumps every one has been seen and the result stops growing.
const UNIVERSE: u64 = 2_000;
const STACKS_PER_DUMP: u64 = 400;

/// xorshift64*: a fixed, quick sequence.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// A raw dump as jemalloc writes it: `STACKS_PER_DUMP` stacks of the universe (3 to 8 frames,
/// fixed per stack), at this process's own ASLR base, its own sample period.
fn write_dump(path: &Path, seed: u64) {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let base = 0x5500_0000_0000 + (next(&mut state) % (1 << 20)) * 0x1000;
    let period = 1u64 << (16 + next(&mut state) % 4);
    let first = next(&mut state) % UNIVERSE;
    let mut out = BufWriter::new(std::fs::File::create(path).expect("create dump"));
    writeln!(out, "heap_v2/{period}\n  t*: 0: 0 [0: 0]").unwrap();
    for i in 0..STACKS_PER_DUMP {
        let stack = (first + i * 7) % UNIVERSE;
        let mut frames = stack.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
        let depth = 3 + stack % 6;
        write!(out, "@").unwrap();
        for d in 0..depth {
            let offset = 0x1000 + (next(&mut frames) % 0x1000) * 0x40 + u64::from(d > 0) * 5;
            write!(out, " 0x{:x}", base + offset).unwrap();
        }
        let n = 1 + next(&mut state) % 20;
        let bytes = n * 8 * (1 + next(&mut state) % 4096);
        writeln!(out, "\n  t*: {n}: {bytes} [{n}: {bytes}]").unwrap();
    }
    writeln!(
        out,
        "\nMAPPED_LIBRARIES:\n{base:x}-{:x} r-xp 00000000 08:01 4242 /opt/service/bin/service",
        base + 0x50_0000
    )
    .unwrap();
    out.flush().unwrap();
}

/// This process's resident high-water mark in bytes.
fn own_peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse().ok())
        .expect("VmHWM in kB");
    kib * 1024
}

/// The child's part: merge the list, print the distinct stacks and the peak.
fn merge_list_and_print_peak(list: &Path) {
    let acc = merge::merge_stream(
        merge::expand(vec![Input::List(list.to_path_buf())]),
        &SymbolizeOptions::default(),
        &ReadPolicy::default(),
        2,
        &|| {},
    )
    .expect("the generated dumps merge");
    println!(
        "child: dumps={} stacks={} peak={}",
        acc.dumps(),
        acc.distinct_stacks(),
        own_peak()
    );
}

/// Runs the child on `dumps` and returns (distinct stacks, peak bytes).
fn peak_merging(dir: &Path, dumps: &[PathBuf], name: &str) -> (usize, u64) {
    let list = dir.join(name);
    let text: String = dumps.iter().map(|p| format!("{}\n", p.display())).collect();
    std::fs::write(&list, text).expect("write the list");
    let output = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "merge_peak_does_not_grow_with_the_number_of_dumps",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_LIST, &list)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("child: ").map(|(_, figures)| figures))
        .unwrap_or_else(|| panic!("no figures from the child: {stdout}"));
    let field = |key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line:?}"))
    };
    assert_eq!(field("dumps=") as usize, dumps.len());
    (field("stacks=") as usize, field("peak="))
}

#[test]
fn merge_peak_does_not_grow_with_the_number_of_dumps() {
    if let Some(list) = std::env::var_os(CHILD_LIST) {
        merge_list_and_print_peak(Path::new(&list));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let paths: Vec<PathBuf> = (0..4 * DUMPS as u64)
        .map(|i| {
            let path = dir.path().join(format!("dump-{i:04}.heap"));
            write_dump(&path, i);
            path
        })
        .collect();
    let size = |paths: &[PathBuf]| -> u64 {
        paths
            .iter()
            .map(|p| std::fs::metadata(p).expect("dump").len())
            .sum()
    };
    let (stacks, peak) = peak_merging(dir.path(), &paths[..DUMPS], "small.list");
    let (stacks_4x, peak_4x) = peak_merging(dir.path(), &paths, "large.list");
    // The same distinct stacks: only the number of dumps differs.
    assert_eq!(stacks, stacks_4x);
    // What the extra dumps are on disk: holding them, parsed or not, takes at least that much.
    let extra = size(&paths[DUMPS..]);
    let allowance = extra / 4;
    eprintln!(
        "{DUMPS} dumps: peak {:.1} MB; {} dumps: peak {:.1} MB; the extra dumps are {:.1} MB on \
         disk (allowance {:.1} MB); {stacks} distinct stacks",
        peak as f64 / 1e6,
        4 * DUMPS,
        peak_4x as f64 / 1e6,
        extra as f64 / 1e6,
        allowance as f64 / 1e6,
    );
    assert!(
        peak_4x <= peak + allowance,
        "4x the dumps peaked at {peak_4x} B against {peak} B: more than {allowance} B more"
    );
}
