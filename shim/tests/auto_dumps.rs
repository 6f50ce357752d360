//! Interval, peak and final dumps appear with jemalloc's names and kinds on a workload with a
//! known peak, and the peak dump (and `peak_snapshot`) holds the call site that made the peak and
//! not the one allocated after it; the real jeprof reads the peak dump.
//!
//! The settings come from `JEPROF_SHIM`, so the test re-runs its own binary as a child whose
//! writer thread is started before `main` (the path a deployed program takes), and checks the
//! child's dump directory afterwards.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use jeprof_shim::jeprof_dumpfmt::{labels, model::symbol_key, read, Profile};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const CHILD_DIR: &str = "JEPROF_SHIM_TEST_DUMP_DIR";
const TEST: &str = "interval_peak_and_final_dumps_have_jemallocs_names_and_the_peak_holds_its_site";
/// The peak: 64 MiB from `peak_site`, freed before `after_site` allocates 16 MiB.
const PEAK_BYTES: usize = 64 << 20;
const AFTER_BYTES: usize = 16 << 20;
const BLOCK: usize = 4096;
const R: u64 = 16 << 10;
const INTERVAL: u64 = 8 << 20;

#[inline(never)]
fn peak_site() -> Vec<u8> {
    vec![1u8; BLOCK]
}

#[inline(never)]
fn after_site() -> Vec<u8> {
    vec![2u8; BLOCK]
}

/// Estimated in-use bytes per site (`peak_site`, `after_site`) from a symbolized profile.
fn per_site(profile: &Profile) -> (f64, f64) {
    let symbols = profile.symbols.as_ref().expect("symbolized");
    let mut out = (0.0, 0.0);
    for stack in &profile.stacks {
        let names: Vec<&String> = stack
            .frames
            .iter()
            .enumerate()
            .filter_map(|(i, &f)| symbols.names.get(&symbol_key(i, f)))
            .flatten()
            .collect();
        if names.iter().any(|n| n.ends_with("::peak_site")) {
            out.0 += stack.counts.inuse.bytes;
        }
        if names.iter().any(|n| n.ends_with("::after_site")) {
            out.1 += stack.counts.inuse.bytes;
        }
    }
    out
}

/// Waits (bounded) until the writer has written a dump of `kind` in `dir`.
fn wait_for_kind(dir: &Path, kind: char) {
    for _ in 0..600 {
        if dumps(dir).iter().any(|d| d.kind == kind) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("no `{kind}` dump in {} after a minute", dir.display());
}

fn child() {
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR).unwrap());
    let peak: Vec<Vec<u8>> = (0..PEAK_BYTES / BLOCK).map(|_| peak_site()).collect();
    black_box(&peak);
    drop(peak);
    let after: Vec<Vec<u8>> = (0..AFTER_BYTES / BLOCK).map(|_| after_site()).collect();
    black_box(&after);

    let at_peak = jeprof_shim::peak_snapshot();
    let (peak_bytes, after_bytes) = per_site(&at_peak);
    println!("peak_snapshot: peak_site {peak_bytes:.0}, after_site {after_bytes:.0}");
    assert_eq!(after_bytes, 0.0, "after_site was allocated after the peak");
    // The tracker re-snapshots at each 10% of growth: it holds at least 1/1.1 of the peak (less a
    // sampling margin; at R = 16 KiB each 4 KiB block is sampled with probability 0.22).
    assert!(
        peak_bytes > 0.8 * PEAK_BYTES as f64,
        "peak_site in the peak snapshot: {peak_bytes}"
    );
    let stats = jeprof_shim::stats();
    assert!(
        stats.peak_bytes_estimate >= stats.live_bytes_estimate,
        "{stats:?}"
    );
    // 80 MiB allocated at 8 MiB per interval dump, and peaks from the first samples up: the
    // writer has work of both kinds. Wait until it did some of each before exiting.
    wait_for_kind(&dir, 'i');
    wait_for_kind(&dir, 'u');
    let manual = jeprof_shim::dump_next().unwrap();
    println!("manual dump: {}", manual.display());
    // Still live when the final dump is written at exit.
    std::mem::forget(after);
}

/// A sequenced dump's name, parsed: `app.<pid>.<seq>.<kind><kseq>.heap` or `…<seq>.f.heap`.
#[derive(Debug, Clone, PartialEq)]
struct Dump {
    path: PathBuf,
    pid: u32,
    seq: u64,
    kind: char,
    kind_seq: Option<u64>,
}

fn dumps(dir: &Path) -> Vec<Dump> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        // Temporary files of a dump being written start with a dot.
        if name.starts_with('.') {
            continue;
        }
        let parts: Vec<&str> = name.split('.').collect();
        assert_eq!(parts.len(), 5, "unexpected file {name}");
        assert_eq!((parts[0], parts[4]), ("app", "heap"), "{name}");
        let kind = parts[3].chars().next().unwrap();
        let kind_seq = (kind != 'f').then(|| parts[3][1..].parse().unwrap());
        if kind == 'f' {
            assert_eq!(parts[3], "f", "{name}");
        }
        out.push(Dump {
            path: path.clone(),
            pid: parts[1].parse().unwrap(),
            seq: parts[2].parse().unwrap(),
            kind,
            kind_seq,
        });
    }
    out.sort_by_key(|d| d.seq);
    out
}

#[test]
fn interval_peak_and_final_dumps_have_jemallocs_names_and_the_peak_holds_its_site() {
    if std::env::var_os(CHILD_DIR).is_some() {
        child();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = jeprof_conformance::target_command(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .env(
            "JEPROF_SHIM",
            format!(
                "sample_rate:{R},seed:3,dump_prefix:{}/app,dump_interval:{INTERVAL},\
                 dump_peak:1.5,dump_final:true",
                dir.path().display()
            ),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("jeprof-shim"), "{stderr}");

    let found = dumps(dir.path());
    println!(
        "{:#?}",
        found
            .iter()
            .map(|d| d.path.file_name().unwrap())
            .collect::<Vec<_>>()
    );
    // One process, one pid; `seq` counts every dump from 0 and each kind counts its own from 0.
    let pid = found[0].pid;
    assert!(found.iter().all(|d| d.pid == pid));
    let seqs: Vec<u64> = found.iter().map(|d| d.seq).collect();
    assert_eq!(seqs, (0..found.len() as u64).collect::<Vec<_>>());
    for kind in ['i', 'u', 'm'] {
        let of_kind: Vec<u64> = found
            .iter()
            .filter(|d| d.kind == kind)
            .map(|d| d.kind_seq.unwrap())
            .collect();
        assert!(!of_kind.is_empty(), "no `{kind}` dump");
        assert_eq!(
            of_kind,
            (0..of_kind.len() as u64).collect::<Vec<_>>(),
            "{kind}"
        );
    }
    let last = found.last().unwrap();
    assert_eq!(last.kind, 'f', "the final dump is the last one");
    assert_eq!(found.iter().filter(|d| d.kind == 'f').count(), 1);

    // Every dump is a heap_v2 profile, labelled with its process and moment; each was written
    // with mode 0600.
    let started = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    for d in &found {
        let bytes = std::fs::read(&d.path).unwrap();
        let profile = read::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", d.path.display()));
        let label = |k: &str| labels::get(&profile.labels, k).map(str::to_string);
        let pid = d.pid.to_string();
        assert_eq!(
            label("pid").as_deref(),
            Some(pid.as_str()),
            "{:?}",
            profile.labels
        );
        assert!(label("program").is_some_and(|p| !p.is_empty()));
        assert!(label("hostname").is_some());
        let time = label("time").and_then(|t| labels::parse_rfc3339_time(&t));
        assert!(
            time.is_some_and(|t| t > started && t <= std::time::SystemTime::now()),
            "{:?}",
            profile.labels
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&d.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", d.path.display());
    }

    // The last peak dump: peak_site, never after_site. The final dump: the other way round.
    let peak_dump = found.iter().rev().find(|d| d.kind == 'u').unwrap();
    let peak = read::parse(&std::fs::read(&peak_dump.path).unwrap()).unwrap();
    let (peak_bytes, after_bytes) = per_site(&peak);
    println!("peak dump: peak_site {peak_bytes:.0}, after_site {after_bytes:.0}");
    assert!(peak_bytes > 0.0 && after_bytes == 0.0);
    let last_dump = read::parse(&std::fs::read(&last.path).unwrap()).unwrap();
    let (peak_bytes, after_bytes) = per_site(&last_dump);
    println!("final dump: peak_site {peak_bytes:.0}, after_site {after_bytes:.0}");
    assert!(peak_bytes == 0.0 && after_bytes > 0.0);

    // The real jeprof reads the peak dump and charges the bytes to peak_site only.
    let output = jeprof_conformance::run(&[
        "--text",
        "--show_bytes",
        "--inuse_space",
        peak_dump.path.to_str().expect("UTF-8 temp path"),
    ]);
    assert_eq!(output.status, 0, "jeprof failed: {}", output.stderr);
    let text = jeprof_conformance::parse_text(&output.stdout).unwrap();
    let cum = |site: &str| {
        text.rows
            .iter()
            .find(|(name, _)| name.ends_with(&format!("::{site}")))
            .map(|(_, &(_, cum))| cum)
    };
    println!("{}", output.stdout);
    assert!(
        cum("peak_site").is_some_and(|c| c > 0.0),
        "{}",
        output.stdout
    );
    assert_eq!(cum("after_site"), None, "{}", output.stdout);
}
