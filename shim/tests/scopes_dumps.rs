//! Per-scope figures in dumps: a whole dump carries `# scope` lines that the real jeprof skips
//! (its table is the one it prints without them) and our reader reads back; `dump_scope` writes a
//! dump of one scope's live samples that jeprof reads as any dump, charging only that scope's
//! allocation site; pprof profiles label each scope's samples `scope=<label>`.

use jeprof_shim::jeprof_dumpfmt::{read, scopes};

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

const PERIOD: u64 = 64 << 10;

#[inline(never)]
fn scope_a_site(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8; 48 << 10]).collect()
}

#[inline(never)]
fn scope_b_site(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8; 96 << 10]).collect()
}

fn jeprof_text(path: &std::path::Path) -> jeprof_conformance::Text {
    let output = jeprof_conformance::run(&[
        "--text",
        "--show_bytes",
        "--inuse_space",
        path.to_str().expect("UTF-8 temp path"),
    ]);
    assert_eq!(output.status, 0, "jeprof failed: {}", output.stderr);
    jeprof_conformance::parse_text(&output.stdout).unwrap()
}

/// The largest cumulative figure of a row naming `site` (the site's closure is inlined into it).
fn cum(text: &jeprof_conformance::Text, site: &str) -> Option<f64> {
    text.rows
        .iter()
        .filter(|(name, _)| name.contains(site))
        .map(|(_, &(_, cum))| cum)
        .reduce(f64::max)
}

#[test]
fn scoped_dumps_are_read_by_jeprof_and_our_reader_and_pprof_labels_each_scope() {
    jeprof_shim::configure("symbolize:true").unwrap();
    jeprof_shim::set_sample_rate(PERIOD);
    jeprof_shim::reseed(23);
    let a = jeprof_shim::scope_sync("dump-a", || scope_a_site(400));
    let b = jeprof_shim::scope_sync("dump-b", || scope_b_site(200));
    jeprof_shim::set_active(false);
    let dir = tempfile::tempdir().unwrap();

    // The whole dump: our reader finds both scopes, each near its truth; jeprof reads the dump.
    let whole = dir.path().join("whole.heap");
    jeprof_shim::dump(&whole).unwrap();
    let text = std::fs::read_to_string(&whole).unwrap();
    assert!(text.contains("\n  # scope "), "no scope lines");
    let profile = read::parse(text.as_bytes()).unwrap();
    let totals = scopes::scope_totals(&profile);
    for (label, truth) in [
        ("dump-a", 400.0 * 48.0 * 1024.0),
        ("dump-b", 200.0 * 96.0 * 1024.0),
    ] {
        let got = totals[label].bytes;
        println!("{label}: {got:.0} (truth {truth:.0})");
        // One run's relative standard deviation is about √(R/T) ≈ 6%: 5 of them.
        assert!((got / truth - 1.0).abs() < 0.3, "{label}: {got} vs {truth}");
    }
    let with_scopes = jeprof_text(&whole);
    let stripped = dir.path().join("stripped.heap");
    let plain: String = text
        .lines()
        .filter(|l| !l.starts_with("  # scope "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&stripped, plain).unwrap();
    assert_eq!(
        with_scopes,
        jeprof_text(&stripped),
        "jeprof read the scope lines"
    );

    // One scope's dump: jeprof charges its site only, with what our reader reads.
    let only_a = dir.path().join("a.heap");
    jeprof_shim::dump_scope("dump-a", &only_a).unwrap();
    let a_text = jeprof_text(&only_a);
    let a_profile = read::read_file(&only_a).unwrap();
    let a_bytes = a_profile.totals().inuse.bytes;
    assert!((a_bytes - totals["dump-a"].bytes).abs() < 1.0);
    let a_cum = cum(&a_text, "scope_a_site")
        .unwrap_or_else(|| panic!("scope_a_site not in jeprof's table: {a_text:?}"));
    assert!((a_cum / a_bytes - 1.0).abs() < 0.01, "{a_cum} vs {a_bytes}");
    assert_eq!(cum(&a_text, "scope_b_site"), None);
    let unknown = jeprof_shim::dump_scope("never-entered", dir.path().join("x.heap"));
    assert!(unknown.unwrap_err().to_string().contains("never-entered"));

    // pprof: every scoped sample is labelled, and the labelled bytes are the scopes' figures.
    let pb = jeprof_shim::pprof(&jeprof_shim::PprofOptions::default());
    let s = |i: i64| pb.string_table[i as usize].as_str();
    let mut labelled = std::collections::BTreeMap::<&str, i64>::new();
    for sample in &pb.sample {
        for l in sample.label.iter().filter(|l| s(l.key) == "scope") {
            *labelled.entry(s(l.str)).or_default() += sample.value[1];
        }
    }
    for label in ["dump-a", "dump-b"] {
        let want = totals[label].bytes;
        let got = labelled[label] as f64;
        // Each sample is rounded to an integer on its own.
        assert!(
            (got - want).abs() <= pb.sample.len() as f64,
            "{label}: {got} vs {want}"
        );
    }
    drop((a, b));
}
