//! `report` and `diff` on a dump of half a million stacks grow their peak by at most three times
//! what the dump grows over a tenth of it, the same shape, measured in the same run: for a raw dump
//! and for a symbolized one, they fold the stacks as they read them, never holding the dump (which
//! would add at least the dump's size again, and over ten times it parsed).
//!
//! The peak is the child's `VmHWM` (its resident high-water mark), read from `/proc` while it
//! writes its report: the report is written last and is far larger than a pipe holds, so the child
//! is still alive, blocked on the pipe, after everything but writing the last pipeful. The smaller
//! dump's peak, taken just before, is the baseline: what the binary holds whatever the dump (its
//! code, its allocator's arenas) and what the machine adds to both, so only a ratio of figures of
//! this run is asserted.
#![cfg(target_os = "linux")]

use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// Stacks of the larger dump: enough that the dump's size, not the binary's, decides the peak.
const STACKS: u64 = 500_000;

/// Stacks of the baseline dump: a tenth, still enough that the child writes many pipefuls.
const BASELINE_STACKS: u64 = STACKS / 10;

/// What the peak may grow per byte the dump grows: 2.2 to 2.7 (this test prints its figures; the
/// same as the whole peak against the whole dump on a million stacks in `bench/RESULTS.md`,
/// "Memory of `report` and `diff`"). Holding the dump would add at least 1, its text; holding
/// its stacks took 10 to 17 times the dump.
const GROWTH_PER_DUMP_BYTE: f64 = 3.0;

/// A dump shaped like a large service's (the lead's `big.heap`, scaled down): two frames a stack,
/// leaves among a million addresses, every caller distinct. With `symbolized`, a symbol section
/// names every leaf address, as one of 5,000 functions; callers stay unnamed. A dump of fewer
/// `stacks` holds the first of the same sequence.
fn write_dump(path: &Path, stacks: u64, symbolized: bool) {
    const BASE: u64 = 0x55d0_c0a0_0000;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let leaves: Vec<u64> = (0..stacks)
        .map(|_| {
            // xorshift64*: a fixed, quick sequence.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            BASE + (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 44)
        })
        .collect();
    let mut out = BufWriter::new(std::fs::File::create(path).expect("create dump"));
    if symbolized {
        let mut named = leaves.clone();
        named.sort_unstable();
        named.dedup();
        writeln!(out, "--- symbol\nbinary=prog").unwrap();
        for a in named {
            writeln!(
                out,
                "0x{a:016x} leaf_function_{}",
                ((a - BASE) * 5000) >> 20
            )
            .unwrap();
        }
        writeln!(out, "---\n--- heap").unwrap();
    }
    writeln!(
        out,
        "heap_v2/524288\n  t*: {stacks}: {} [0: 0]",
        stacks * 524288
    )
    .unwrap();
    for (i, leaf) in leaves.iter().enumerate() {
        let caller = BASE + 0x20_0000 + i as u64 * 16;
        writeln!(out, "@ 0x{leaf:x} 0x{caller:x}\n  t*: 1: 524288 [0: 0]").unwrap();
    }
    writeln!(
        out,
        "\nMAPPED_LIBRARIES:\n55d0c0a00000-55d0c1a00000 r-xp 00000000 00:00 0 /usr/bin/prog"
    )
    .unwrap();
    out.flush().unwrap();
}

/// The child's resident high-water mark in bytes, while it is alive.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs the binary and returns its peak resident size, sampled before each read of its output.
fn peak_of(args: &[&str]) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jeprof-compat"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the jeprof-compat binary runs");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout");
    let (mut peak, mut written) = (0, 0);
    let mut buffer = vec![0; 1 << 16];
    loop {
        if let Some(hwm) = vm_hwm(pid) {
            peak = peak.max(hwm);
        }
        let n = stdout.read(&mut buffer).expect("read stdout");
        if n == 0 {
            break;
        }
        written += n;
    }
    let output = child.wait_with_output().expect("wait");
    assert!(
        output.status.success(),
        "jeprof-compat {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Sampled while it was blocked writing: its report is many pipefuls long.
    assert!(written > 1 << 20, "{args:?} wrote only {written} bytes");
    assert!(peak > 0, "{args:?}: no sample of its memory");
    peak
}

#[test]
fn report_and_diff_peaks_grow_at_most_three_times_as_much_as_the_dump_raw_and_symbolized() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();
    for symbolized in [false, true] {
        let kind = if symbolized { "sym" } else { "raw" };
        // (path, size) of the baseline dump and of the larger one.
        let dumps: Vec<(String, u64)> = [BASELINE_STACKS, STACKS]
            .into_iter()
            .map(|stacks| {
                let path = dir.path().join(format!("{kind}-{stacks}.heap"));
                write_dump(&path, stacks, symbolized);
                let size = std::fs::metadata(&path).expect("dump").len();
                (path.to_str().expect("UTF-8 path").to_string(), size)
            })
            .collect();
        let commands: [fn(&str) -> Vec<&str>; 2] = [
            |dump| vec!["report", "--show_bytes", dump],
            // A flat diff of the symbolized dump prints its 5,000 leaf functions only: `--cum`
            // prints every caller too, so that the child is sampled while it writes.
            if symbolized {
                |dump| vec!["diff", "--cum", "--show_bytes", dump, dump]
            } else {
                |dump| vec!["diff", "--show_bytes", dump, dump]
            },
        ];
        for command in commands {
            let [(small, small_size), (large, size)] = [&dumps[0], &dumps[1]];
            let baseline = peak_of(&command(small));
            let peak = peak_of(&command(large));
            let growth = peak.saturating_sub(baseline) as f64 / (size - small_size) as f64;
            let line = format!(
                "{} {kind}: peak {:.1} MB on a {:.1} MB dump, {:.1} MB on a {:.1} MB one: {growth:.2} \
                 bytes more per byte more of dump (limit {GROWTH_PER_DUMP_BYTE})",
                command(large)[0],
                baseline as f64 / 1e6,
                *small_size as f64 / 1e6,
                peak as f64 / 1e6,
                *size as f64 / 1e6,
            );
            eprintln!("{line}");
            if growth > GROWTH_PER_DUMP_BYTE {
                problems.push(line);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
