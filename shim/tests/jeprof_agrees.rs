//! The real jeprof, run on a symbolized shim dump (no binary given), prints per-function figures
//! equal to the shim's own unbiased figures, within the bound jeprof-dumpfmt guarantees for stacks
//! of at least 2·R (0.1% + 1 byte; jeprof truncates to integers).

mod common;

use common::SITES;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// `(flat, cum)` bytes jeprof prints for the function whose name ends with `::<site>`.
fn jeprof_figures(output: &str, site: &str) -> Option<(f64, f64)> {
    let suffix = format!("::{site}");
    output.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || !fields[1].ends_with('%') {
            return None;
        }
        let name = fields[5..].join(" ");
        if !name.ends_with(&suffix) {
            return None;
        }
        Some((fields[0].parse().ok()?, fields[3].parse().ok()?))
    })
}

fn main() {
    jeprof_shim::reseed(7);
    let live = common::run(100);
    let period = jeprof_shim::stats().sample_rate;
    assert_eq!(period, jeprof_shim::DEFAULT_SAMPLE_RATE);

    let profile = jeprof_shim::snapshot();
    let dir = std::env::temp_dir().join(format!("jeprof-shim-agrees-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("heap.prof");
    jeprof_shim::dump(&dump).unwrap();

    // The dump holds the same stacks as the snapshot (nothing sampled in between).
    let mut back =
        jeprof_shim::jeprof_dumpfmt::read::parse(&std::fs::read(&dump).unwrap()).unwrap();
    back.coalesce();
    assert_eq!(back.stacks.len(), {
        let mut p = profile.clone();
        p.coalesce();
        p.stacks.len()
    });

    // The real jeprof, built from the tikv-jemalloc-sys sources (fails with the reason when perl,
    // binutils or the sources are missing).
    let output = jeprof_conformance::run(&[
        "--text",
        "--show_bytes",
        "--inuse_space",
        dump.to_str().expect("UTF-8 temp path"),
    ]);
    let stdout = output.stdout.as_str();
    assert!(
        output.status == 0,
        "jeprof failed: {}\n{stdout}",
        output.stderr
    );

    let symbols = profile.symbols.as_ref().expect("symbolized by default");
    // The in-process symbolizer gives each name its source line too, written as `# line` lines
    // that jeprof ignores (its figures are checked below) and read back as written.
    assert_eq!(
        back.symbols.as_ref().map(|s| &s.lines),
        Some(&symbols.lines)
    );
    let site_lines: Vec<_> = symbols
        .names
        .iter()
        .filter_map(|(address, names)| {
            let i = names.iter().position(|n| n.ends_with("::site_small"))?;
            symbols.lines.get(address)?.get(i)?.as_ref()
        })
        .collect();
    assert!(
        !site_lines.is_empty()
            && site_lines
                .iter()
                .all(|l| l.file.ends_with("common/mod.rs") && l.line > 0),
        "{site_lines:?}"
    );
    let mut attributor = common::Attributor::default();
    let ours = common::per_site(&profile, &mut attributor);
    for (i, (site, truth)) in SITES.iter().enumerate() {
        let want = ours[i].bytes;
        assert!(want >= 2.0 * period as f64, "{site}: {want}");
        let (_, cum) = jeprof_figures(stdout, site)
            .unwrap_or_else(|| panic!("{site} not in jeprof's output:\n{stdout}"));
        println!("{site}: jeprof {cum:.0}, shim {want:.1}, truth {truth:.0}");
        assert!(
            (cum - want).abs() <= want * 1e-3 + 1.0,
            "{site}: jeprof printed {cum}, the shim's figure is {want}"
        );
    }
    // Every leaf function's flat figure, for leaves whose stacks are all big enough.
    let mut flat: std::collections::BTreeMap<String, (f64, bool)> = Default::default();
    for stack in &profile.stacks {
        let Some(leaf) = stack.frames.first().and_then(|f| symbols.names.get(f)) else {
            continue;
        };
        // jeprof charges a leaf's flat figure to the innermost inlined function, and prints
        // names shortened to `::<last segment>` (templates stripped), inlined ones with
        // " (inline)".
        let short = leaf[0].rsplit("::").next().unwrap_or(&leaf[0]).to_string();
        let entry = flat.entry(short).or_default();
        entry.0 += stack.counts.inuse.bytes;
        entry.1 |= stack.counts.inuse.bytes > 0.0 && stack.counts.inuse.bytes < 2.0 * period as f64;
    }
    let mut compared = 0;
    for (name, (want, has_small_stack)) in &flat {
        if *has_small_stack || *want == 0.0 {
            continue;
        }
        let line = stdout.lines().find(|l| {
            let l = l.trim_end();
            let l = l.strip_suffix(" (inline)").unwrap_or(l);
            l.ends_with(&format!("::{name}"))
        });
        let Some(line) = line else { continue };
        let got: f64 = line.split_whitespace().next().unwrap().parse().unwrap();
        println!("flat {name}: jeprof {got:.0}, shim {want:.1}");
        assert!(
            (got - want).abs() <= want * 1e-3 + 1.0,
            "flat {name}: jeprof printed {got}, the shim's figure is {want}"
        );
        compared += 1;
    }
    assert!(compared >= 1, "no leaf function compared:\n{stdout}");
    drop(live);
    std::fs::remove_dir_all(&dir).ok();
}
