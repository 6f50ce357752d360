//! write → read → compare on every valid fixture of `fixtures/` (synthetic and captured from real
//! jemalloc): each dump is read, written again with the default options (and with jemalloc's
//! plain rounding), read back, and every stack's figures must come back within the bound the
//! encoding promises for that stack; symbols, maps and header threads come back unchanged.

use std::path::{Path, PathBuf};

use jeprof_dumpfmt::encode::{encode_pair, relative_error, Rounding};
use jeprof_dumpfmt::write::HeaderPeriod;
use jeprof_dumpfmt::{Counts, Estimate, Profile, WriteOptions};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut out = Vec::new();
    for sub in ["synthetic", "real"] {
        let dir = root.join(sub);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "heap") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn header_period(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("heap_v2/"))
        .and_then(|p| p.trim().parse().ok())
        .expect("a heap_v2 header")
}

/// The bound the encoding promises for `e` at header period `header`: the relative error of
/// jeprof's figures for the entries `encode_pair` chooses (a hair above, for summation order).
fn bound(e: &Estimate, header: u64, rounding: Rounding) -> f64 {
    let pairs = encode_pair(e.objects, e.bytes, header, rounding);
    relative_error(&pairs, e.objects, e.bytes, header) + 1e-9
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs() + 1e-9
}

fn check_estimate(
    what: &str,
    got: &Estimate,
    want: &Estimate,
    header: u64,
    r: Rounding,
) -> Vec<String> {
    let b = bound(want, header, r);
    let mut problems = Vec::new();
    if !close(got.objects, want.objects, b) || !close(got.bytes, want.bytes, b) {
        problems.push(format!(
            "{what}: wrote {} objects {} bytes, read back {} {} (bound {b:e})",
            want.objects, want.bytes, got.objects, got.bytes
        ));
    }
    problems
}

fn check_counts(what: &str, got: &Counts, want: &Counts, header: u64, r: Rounding) -> Vec<String> {
    let mut p = check_estimate(&format!("{what} inuse"), &got.inuse, &want.inuse, header, r);
    p.extend(check_estimate(
        &format!("{what} accum"),
        &got.accum,
        &want.accum,
        header,
        r,
    ));
    p
}

fn round_trip(path: &Path, options: &WriteOptions) -> Vec<String> {
    let mut original = jeprof_dumpfmt::read::read_file(path).expect("valid fixture");
    original.coalesce();
    let text = jeprof_dumpfmt::write::to_string(&original, options).expect("write");
    let header = header_period(&text);
    let mut back: Profile = jeprof_dumpfmt::read::parse(text.as_bytes()).expect("read back");
    back.coalesce();
    let name = path.file_name().expect("name").to_string_lossy();
    let mut problems = Vec::new();
    if back.sample_period != original.sample_period {
        problems.push(format!(
            "{name}: period {} became {}",
            original.sample_period, back.sample_period
        ));
    }
    let kept: Vec<_> = original
        .stacks
        .iter()
        .filter(|s| !s.counts.is_zero())
        .collect();
    if back.stacks.len() != kept.len() {
        problems.push(format!(
            "{name}: {} stacks became {}",
            kept.len(),
            back.stacks.len()
        ));
    }
    for s in kept {
        let Some(b) = back.stacks.iter().find(|b| b.frames == s.frames) else {
            problems.push(format!(
                "{name}: stack {:x?} lost",
                &s.frames[..s.frames.len().min(3)]
            ));
            continue;
        };
        let what = format!("{name} stack {:#x}", s.frames[0]);
        problems.extend(check_counts(
            &what,
            &b.counts,
            &s.counts,
            header,
            options.rounding,
        ));
        for t in &s.threads {
            let mut got = Counts::default();
            for x in b.threads.iter().filter(|x| x.thread == t.thread) {
                got.add(&x.counts);
            }
            problems.extend(check_counts(
                &format!("{what} t{}", t.thread),
                &got,
                &t.counts,
                header,
                options.rounding,
            ));
        }
    }
    if back.symbols != original.symbols {
        problems.push(format!("{name}: symbols differ after the round trip"));
    }
    if back.mapped_libraries != original.mapped_libraries {
        problems.push(format!(
            "{name}: MAPPED_LIBRARIES differ after the round trip"
        ));
    }
    let names = |p: &Profile| {
        p.threads
            .iter()
            .map(|t| (t.thread, t.name.clone()))
            .collect::<Vec<_>>()
    };
    if names(&back) != names(&original) {
        problems.push(format!(
            "{name}: header threads {:?} became {:?}",
            names(&original),
            names(&back)
        ));
    }
    problems
}

#[test]
fn every_fixture_survives_write_then_read_within_the_encoding_bound() {
    let files = fixtures();
    assert!(files.len() >= 10, "fixtures not found: {files:?}");
    let mut problems = Vec::new();
    for f in &files {
        problems.extend(round_trip(f, &WriteOptions::default()));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_fixture_survives_write_then_read_with_plain_rounding() {
    let options = WriteOptions {
        rounding: Rounding::Nearest,
        symbols: true,
        header_period: HeaderPeriod::Sampling,
        ..WriteOptions::default()
    };
    let mut problems = Vec::new();
    for f in &fixtures() {
        problems.extend(round_trip(f, &options));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn writing_what_was_read_twice_gives_the_same_figures() {
    for f in &fixtures() {
        let once = jeprof_dumpfmt::read::read_file(f).expect("valid fixture");
        let a = jeprof_dumpfmt::write::to_string(&once, &WriteOptions::default()).expect("write");
        let mut twice = jeprof_dumpfmt::read::parse(a.as_bytes()).expect("read back");
        let b = jeprof_dumpfmt::write::to_string(&twice, &WriteOptions::default()).expect("write");
        let mut again = jeprof_dumpfmt::read::parse(b.as_bytes()).expect("read back");
        // The writer adds up entries with the same frames before encoding, so compare per stack:
        // a second round trip moves no stack by more than the encoding's search tolerance.
        twice.coalesce();
        again.coalesce();
        assert_eq!(twice.stacks.len(), again.stacks.len(), "{}", f.display());
        for (x, y) in twice.stacks.iter().zip(&again.stacks) {
            assert_eq!(x.frames, y.frames, "{}", f.display());
            for (p, q) in [
                (x.counts.inuse, y.counts.inuse),
                (x.counts.accum, y.counts.accum),
            ] {
                assert!(
                    close(q.bytes, p.bytes, 1e-5) && close(q.objects, p.objects, 1e-5),
                    "{}: {p:?} became {q:?}",
                    f.display()
                );
            }
        }
    }
}
