//! Fleet merge: unbias-then-sum across processes, builds and periods; any grouping equals one merge;
//! the merged dump reads back (and reports, in jeprof too) as the sum of its inputs.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use jeprof_compat::names::NameStyle;
use jeprof_compat::report::{self, ReportOptions};
use jeprof_compat::{load_bytes, Accumulator, ResolvedProfile, SymbolizeOptions};
use jeprof_dumpfmt::{Counts, Estimate, Profile};
use proptest::prelude::*;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(common::fixtures().join(name)).expect("fixture")
}

fn resolved(bytes: &[u8], name: &str) -> ResolvedProfile {
    load_bytes(bytes, name, &SymbolizeOptions::default()).expect("fixture parses")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Every figure a tree reduce must carry: objects, bytes and both variances, in use and allocated.
fn close_counts(a: &Counts, b: &Counts) -> bool {
    [(&a.inuse, &b.inuse), (&a.accum, &b.accum)]
        .iter()
        .all(|(x, y)| {
            close(x.objects, y.objects)
                && close(x.bytes, y.bytes)
                && close(x.objects_variance, y.objects_variance)
                && close(x.bytes_variance, y.bytes_variance)
        })
}

fn same(
    a: &BTreeMap<Vec<Arc<[String]>>, Counts>,
    b: &BTreeMap<Vec<Arc<[String]>>, Counts>,
) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, ca), (kb, cb))| ka == kb && close_counts(ca, cb))
}

fn stacks_strategy() -> impl Strategy<Value = Vec<(Vec<u8>, f64, f64)>> {
    prop::collection::vec(
        (
            prop::collection::vec(1u8..6, 1..5),
            1.0f64..1e4,
            8.0f64..1e7,
        ),
        0..8,
    )
}

/// Raw dumps whose program names their addresses (a non-PIE and a PIE one), in both name styles:
/// the fast path names their frames as `resolve` does (the property tests below cover symbol
/// sections and raw dumps nothing names).
#[test]
fn raw_dumps_named_by_their_program_fold_as_resolve_then_add() {
    let fixtures = common::fixtures();
    for (dump, program) in [("nonpie.heap", "prog"), ("pie.heap", "prog_pie")] {
        let profile = jeprof_dumpfmt::read::read_file(fixtures.join(dump)).unwrap();
        for style in [NameStyle::Clean, NameStyle::Jeprof] {
            let options = SymbolizeOptions {
                binary: Some(fixtures.join(program)),
                style,
                ..SymbolizeOptions::default()
            };
            fast_path_agrees(&profile, &options);
            let mut fast = Accumulator::new();
            fast.add_dump(profile.clone(), &options);
            let merged = fast.canonical();
            let named = |name: &str| {
                merged
                    .keys()
                    .flatten()
                    .any(|frame| frame.iter().any(|n| n == name))
            };
            assert!(named("main") && named("leaf_alloc"), "{dump}: {merged:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn merging_in_any_grouping_equals_one_merge(
        parts in prop::collection::vec((stacks_strategy(), 0u32..24, 0u64..4), 1..6),
        split in 0usize..6,
    ) {
        let profiles: Vec<ResolvedProfile> = parts
            .iter()
            .enumerate()
            .map(|(i, (stacks, lg, build))| {
                let p = common::generated_profile(stacks, 1u64 << lg, 0x400000 + build * 0x10000);
                jeprof_compat::resolve(p, &format!("dump{i}"), &SymbolizeOptions::default())
            })
            .collect();
        let mut one = Accumulator::new();
        for p in &profiles {
            one.add(p);
        }
        // Left part merged, written out as a merged profile, then merged again with the rest.
        let split = split.min(profiles.len());
        let mut left = Accumulator::new();
        for p in &profiles[..split] {
            left.add(p);
        }
        let mut right = Accumulator::new();
        for p in profiles[split..].iter().rev() {
            right.add(p);
        }
        let mut nested = Accumulator::new();
        nested.add(&left.to_resolved("left"));
        nested.add(&right.to_resolved("right"));
        // The partials as the merged dumps' model (what `merge -o` writes, before its integers):
        // the merge of merges is the merge of everything.
        let options = SymbolizeOptions::default();
        let mut shipped = Accumulator::new();
        shipped.add_dump(left.to_profile(), &options);
        shipped.add_dump(right.to_profile(), &options);
        prop_assert!(same(&one.canonical(), &shipped.canonical()));
        prop_assert_eq!(shipped.period(), one.period());
        // And the parallel reduce step.
        left.absorb(right);
        prop_assert!(same(&one.canonical(), &left.canonical()));
        prop_assert!(same(&one.canonical(), &nested.canonical()));
        prop_assert_eq!(one.period(), left.period());
        prop_assert_eq!(one.period(), nested.period());
        let min_period = parts.iter().map(|(_, lg, _)| 1u64 << lg).min().unwrap();
        prop_assert_eq!(one.period(), min_period);
    }
}

/// jeprof's units of R in an estimate (n_c of `docs/design.md` §4): what decides how closely a
/// heap_v2 entry can carry it.
fn units(e: &Estimate, period: u64) -> f64 {
    if e.objects <= 0.0 || e.bytes <= 0.0 {
        return 0.0;
    }
    e.objects * -(-(e.bytes / e.objects) / period as f64).exp_m1()
}

/// A dump's labels: some of three keys, with one of two values each (so inputs agree on some and
/// disagree on others).
fn labels_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((0u8..3, 0u8..2, any::<bool>()), 3).prop_map(|keys| {
        keys.into_iter()
            .enumerate()
            .filter(|(_, (_, _, present))| *present)
            .map(|(i, (_, value, _))| {
                (
                    ["service", "host", "build_id"][i].to_string(),
                    format!("v{value}"),
                )
            })
            .collect()
    })
}

/// Stacks as allocations make them: objects of at least 8 bytes on average (heap_v2 cannot carry
/// fewer bytes than objects).
fn allocation_stacks_strategy() -> impl Strategy<Value = Vec<(Vec<u8>, f64, f64)>> {
    prop::collection::vec(
        (
            prop::collection::vec(1u8..6, 1..5),
            1.0f64..1e4,
            8.0f64..1e6,
        )
            .prop_map(|(frames, objects, size)| (frames, objects, objects * size)),
        0..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The tree reduce as it runs: dumps merged in groups, each partial written as a heap_v2 file
    /// (`merge -o`), the partials read back and merged. Against merging every dump at once: the
    /// same stacks (frame identities through the partials' symbol sections), the same period, the
    /// variances exactly (the `# var` lines carry them as shortest round-trip reals), and every
    /// figure of a stack of at least 8 units of the largest R among the dumps (a partial may be
    /// written at that period) to the writer's rounding (`docs/design.md` §4:
    /// within 0.014% there; asserted at 0.1%).
    #[test]
    fn partial_merges_shipped_as_heap_v2_merge_to_the_merge_of_everything(
        parts in prop::collection::vec(
            (allocation_stacks_strategy(), 4u32..20, 0u64..4, labels_strategy()),
            2..10,
        ),
        groups in 1usize..4,
    ) {
        let options = SymbolizeOptions::default();
        let profiles: Vec<Profile> = parts
            .iter()
            .map(|(stacks, lg, build, labels)| {
                let mut p = common::generated_profile(stacks, 1u64 << lg, 0x400000 + build * 0x10000);
                p.labels = labels.clone();
                p
            })
            .collect();
        let mut one = Accumulator::new();
        for p in &profiles {
            one.add_dump(p.clone(), &options);
        }
        let rounding = jeprof_compat::merge::OutputRounding::default().write_options();
        let mut tree = Accumulator::new();
        for group in profiles.chunks(profiles.len().div_ceil(groups)) {
            let mut partial = Accumulator::new();
            for p in group {
                partial.add_dump(p.clone(), &options);
            }
            let text = jeprof_dumpfmt::write::to_string(&partial.to_profile(), &rounding).unwrap();
            let shipped = jeprof_dumpfmt::read::parse(text.as_bytes()).unwrap();
            tree.add_dump(shipped, &options);
        }
        prop_assert_eq!(tree.period(), one.period());
        prop_assert_eq!(tree.labels(), one.labels());
        prop_assert_eq!(tree.dropped_labels().collect::<Vec<_>>(), one.dropped_labels().collect::<Vec<_>>());
        let (want, got) = (one.canonical(), tree.canonical());
        // Every stack the partials carried is one of the whole merge's; every stack of the whole
        // merge worth at least one unit of the largest R among the dumps (an integer count any
        // partial's heap_v2 can write) survives the partials. Smaller ones may round to nothing
        // in a partial written at a larger period than the whole merge's (`docs/design.md` §4).
        let largest_period = profiles.iter().map(|p| p.sample_period).max().unwrap();
        for key in got.keys().filter(|k| !k.is_empty()) {
            prop_assert!(want.contains_key(key), "{key:?} appeared in the partials");
        }
        for (key, w) in want.iter().filter(|(k, _)| !k.is_empty()) {
            if units(&w.inuse, largest_period).max(units(&w.accum, largest_period)) >= 1.0 {
                prop_assert!(got.contains_key(key), "{key:?}: {w:?} lost in the partials");
            }
        }
        for (key, w) in &want {
            // A stack lost to rounding (below one unit, checked above) has nothing to compare.
            let Some(g) = got.get(key).copied() else { continue };
            for (x, y) in [(&w.inuse, &g.inuse), (&w.accum, &g.accum)] {
                prop_assert!(close(x.objects_variance, y.objects_variance), "{key:?}: {w:?} vs {g:?}");
                prop_assert!(close(x.bytes_variance, y.bytes_variance), "{key:?}: {w:?} vs {g:?}");
                if units(x, largest_period) >= 8.0 {
                    let near = |a: f64, b: f64| (a - b).abs() <= 1e-3 * a.abs().max(b.abs());
                    prop_assert!(near(x.objects, y.objects), "{key:?}: {w:?} vs {g:?}");
                    prop_assert!(near(x.bytes, y.bytes), "{key:?}: {w:?} vs {g:?}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// `merge_stream` over files (what `merge` runs: chunks of 16 dumps on several workers, added
    /// in chunk order) equals the in-memory merge of the same dumps, one after the other: every
    /// figure and variance, the period and the count of dumps.
    #[test]
    fn streamed_merge_of_files_equals_the_in_memory_merge(
        parts in prop::collection::vec((stacks_strategy(), 0u32..24, 0u64..4), 1..70),
        jobs in 1usize..5,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let options = SymbolizeOptions::default();
        let mut in_memory = Accumulator::new();
        let mut paths = Vec::new();
        for (i, (stacks, lg, build)) in parts.iter().enumerate() {
            let p = common::generated_profile(stacks, 1u64 << lg, 0x400000 + build * 0x10000);
            // The dump as a file (its figures through our writer and reader), and the same dump
            // as read back, merged in memory.
            let path = dir.path().join(format!("dump{i:03}.heap"));
            jeprof_dumpfmt::write::write_file(&p, &path, &Default::default()).unwrap();
            let read = jeprof_dumpfmt::read::read_file(&path).unwrap();
            in_memory.add(&jeprof_compat::resolve(read, "d", &options));
            paths.push(path);
        }
        let streamed = jeprof_compat::merge::merge_stream(
            jeprof_compat::merge::expand(vec![jeprof_compat::merge::Input::Dir(dir.path().to_path_buf())]),
            &options,
            &Default::default(),
            jobs,
            &|| {},
        )
        .unwrap();
        prop_assert!(same(&in_memory.canonical(), &streamed.canonical()));
        prop_assert_eq!(in_memory.period(), streamed.period());
        prop_assert_eq!(in_memory.dumps(), streamed.dumps());
        prop_assert_eq!(streamed.dumps(), paths.len());
    }
}

/// What `merge_files` does per dump (`add_dump`) against the general path (`resolve`, then `add`).
fn fast_path_agrees(profile: &Profile, options: &SymbolizeOptions) {
    let mut fast = Accumulator::new();
    let mut slow = Accumulator::new();
    for _ in 0..2 {
        fast.add_dump(profile.clone(), options);
        slow.add(&jeprof_compat::resolve(profile.clone(), "p", options));
    }
    assert_eq!(
        format!("{:?}", fast.canonical()),
        format!("{:?}", slow.canonical())
    );
    assert_eq!(fast.period(), slow.period());
    assert_eq!(fast.dumps(), slow.dumps());
    let write = |acc: &Accumulator| {
        jeprof_dumpfmt::write::to_string(&acc.to_profile(), &Default::default()).unwrap()
    };
    assert_eq!(write(&fast), write(&slow));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Symbol sections that miss frames (named through the memory map, or by address), empty
    /// entries, kernel frames, mangled names and inlined frames: the merge's fast path folds them as
    /// `resolve` + `add` does.
    #[test]
    fn merge_fast_path_equals_resolve_then_add(
        stacks in stacks_strategy(),
        drop_mask in any::<u32>(),
        empty_mask in any::<u32>(),
        kernel in any::<bool>(),
        with_maps in any::<bool>(),
        jeprof_names in any::<bool>(),
    ) {
        let mut p = common::generated_profile(&stacks, 4096, 0x400000);
        let symbols = p.symbols.as_mut().unwrap();
        let keys: Vec<u64> = symbols.names.keys().copied().collect();
        for (i, k) in keys.iter().enumerate() {
            let bit = 1u32 << (i % 32);
            if drop_mask & bit != 0 {
                symbols.names.remove(k);
            } else if empty_mask & bit != 0 {
                symbols.names.insert(*k, Vec::new());
            } else if i % 3 == 0 {
                symbols.names.insert(
                    *k,
                    vec![
                        "_ZN4core3ptr13drop_in_place17h0123456789abcdefE".to_string(),
                        format!("std::vector<int>::push_back(int const&) {i}"),
                    ],
                );
            }
        }
        if kernel {
            if let Some(s) = p.stacks.first_mut() {
                s.frames.push(0xffff_ffff_8100_0000);
            }
        }
        if with_maps {
            p.mapped_libraries = Some(
                "00400000-00401000 r-xp 00000000 fe:00 1 /opt/app/bin/service\n\
                 00401000-00402000 r-xp 00001000 fe:00 2 /usr/lib/libfoo.so.1\n"
                    .to_string(),
            );
        }
        let options = SymbolizeOptions {
            style: if jeprof_names { NameStyle::Jeprof } else { NameStyle::Clean },
            ..SymbolizeOptions::default()
        };
        fast_path_agrees(&p, &options);
    }
}

#[test]
fn merge_fast_path_equals_resolve_then_add_on_the_fixtures() {
    for entry in std::fs::read_dir(common::fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "heap") {
            let profile = jeprof_dumpfmt::read::read_file(&path).unwrap();
            fast_path_agrees(&profile, &SymbolizeOptions::default());
        }
    }
}

#[test]
fn different_builds_merge_by_function_name() {
    let a = common::generated_profile(&[(vec![1, 2, 3], 10.0, 1000.0)], 4096, 0x400000);
    let b = common::generated_profile(&[(vec![1, 2, 3], 5.0, 500.0)], 1024, 0x7700000);
    let mut acc = Accumulator::new();
    acc.add(&jeprof_compat::resolve(
        a,
        "a",
        &SymbolizeOptions::default(),
    ));
    acc.add(&jeprof_compat::resolve(
        b,
        "b",
        &SymbolizeOptions::default(),
    ));
    assert_eq!(acc.distinct_stacks(), 1);
    let (_, counts) = acc.canonical().into_iter().next().unwrap();
    assert!(close(counts.inuse.bytes, 1500.0));
    assert_eq!(acc.period(), 1024);
}

#[test]
fn different_processes_merge_by_module_and_offset_despite_aslr() {
    let one = resolved(&fixture("pie.heap"), "one");
    let two = resolved(common::relocated_pie(0x1234_5000).as_bytes(), "two");
    assert_ne!(
        one.stacks[0].frames[0].key, two.stacks[0].frames[0].key,
        "ASLR moved the frames"
    );
    let mut alone = Accumulator::new();
    alone.add(&one);
    let mut acc = Accumulator::new();
    acc.add(&one);
    acc.add(&two);
    assert_eq!(
        acc.distinct_stacks(),
        alone.distinct_stacks(),
        "every stack of process two matched process one"
    );
    let total: f64 = acc.canonical().values().map(|c| c.inuse.bytes).sum();
    let single: f64 = one.stacks.iter().map(|s| s.counts.inuse.bytes).sum();
    assert!(close(total, 2.0 * single));
    // Frames are named module+offset when there are no symbols.
    let names: Vec<String> = acc
        .canonical()
        .keys()
        .flatten()
        .map(|f| f[0].clone())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("prog_pie+0x")),
        "{names:?}"
    );
}

#[test]
fn memory_grows_with_distinct_stacks_not_with_dumps() {
    let dump = resolved(&fixture("symbolized.heap"), "s");
    let mut acc = Accumulator::new();
    acc.add(&dump);
    let stacks = acc.distinct_stacks();
    for _ in 0..200 {
        acc.add(&dump);
    }
    assert_eq!(acc.distinct_stacks(), stacks);
    assert_eq!(acc.dumps(), 201);
}

#[test]
fn merged_dump_reads_back_as_the_sum_of_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.heap");
    let a = common::fixtures().join("a.heap");
    let b = common::fixtures().join("b.heap");
    let s = common::fixtures().join("symbolized.heap");
    let out_s = out.display().to_string();
    common::run_ok(&[
        "merge",
        "-o",
        &out_s,
        "--jobs",
        "2",
        &a.display().to_string(),
        &b.display().to_string(),
        &s.display().to_string(),
    ]);
    let options = ReportOptions {
        show_bytes: true,
        ..Default::default()
    };
    let inputs: Vec<ResolvedProfile> = ["a.heap", "b.heap", "symbolized.heap"]
        .iter()
        .map(|n| resolved(&fixture(n), n))
        .collect();
    let want = report::build(&inputs, &options);
    let merged = jeprof_compat::load(&out, &SymbolizeOptions::default(), &Default::default())
        .expect("merged dump reads");
    // The smallest period of the inputs, or a power-of-two fraction of it the writer found more
    // accurate: every stack stays representable either way.
    assert!(
        merged.sample_period <= 1024 && merged.sample_period > 0,
        "{}",
        merged.sample_period
    );
    let got = report::build(&[merged], &options);
    assert!(
        (got.total - want.total).abs() / want.total < 1e-3,
        "{} vs {}",
        got.total,
        want.total
    );
    for row in &want.rows {
        let other = got
            .rows
            .iter()
            .find(|r| r.name == row.name)
            .unwrap_or_else(|| panic!("{} missing", row.name));
        assert!(
            (other.cum - row.cum).abs() <= 1e-3 * row.cum.max(1.0) + 1.0,
            "{}: {} vs {}",
            row.name,
            other.cum,
            row.cum
        );
    }
}

/// `merge --rounding`: `optimal` and `nearest` write the smallest input period R in the header, as
/// jemalloc does; `best` R or a power-of-two fraction of it down to R/64; `nearest` one entry per
/// stack. Each reads back as the merge's figures.
#[test]
fn output_roundings_keep_their_header_period_and_read_back_as_the_merge() {
    use jeprof_compat::merge::OutputRounding;

    let mut acc = Accumulator::new();
    for name in ["a.heap", "b.heap", "symbolized.heap"] {
        acc.add(&resolved(&fixture(name), name));
    }
    let merged = acc.to_profile();
    let period = merged.sample_period;
    let want: f64 = merged.stacks.iter().map(|s| s.counts.inuse.bytes).sum();
    for rounding in [
        OutputRounding::Optimal,
        OutputRounding::Best,
        OutputRounding::Nearest,
    ] {
        let text = jeprof_dumpfmt::write::to_string(&merged, &rounding.write_options()).unwrap();
        let header: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("heap_v2/"))
            .expect("a heap_v2 header")
            .trim()
            .parse()
            .expect("a period");
        if rounding == OutputRounding::Best {
            assert!(
                (0..=6).any(|k| header == period >> k),
                "{header} for R = {period}"
            );
        } else {
            assert_eq!(header, period, "{rounding:?}");
        }
        if rounding == OutputRounding::Nearest {
            let entries = text.lines().filter(|l| l.starts_with('@')).count();
            assert_eq!(entries, merged.stacks.len());
        }
        let back = jeprof_dumpfmt::read::parse(text.as_bytes()).expect("reads back");
        assert_eq!(back.sample_period, period, "{rounding:?}");
        let got: f64 = back.stacks.iter().map(|s| s.counts.inuse.bytes).sum();
        assert!(
            (got - want).abs() <= 1e-3 * want,
            "{rounding:?}: {got} vs {want}"
        );
    }
}

#[test]
fn real_jeprof_reports_the_merged_dump_like_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.heap");
    let inputs = ["a.heap", "b.heap", "symbolized.heap", "rust.heap"]
        .map(|n| common::fixtures().join(n).display().to_string());
    let mut args = vec!["merge".to_string(), "-o".into(), out.display().to_string()];
    args.extend(inputs.iter().cloned());
    common::run_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // The real jeprof, built from the tikv-jemalloc-sys sources (fails with the reason when perl,
    // binutils or the sources are missing).
    let jeprof_out = jeprof_conformance::run(&["--text", "--show_bytes", out.to_str().unwrap()]);
    let text = &jeprof_out.stdout;
    let total: f64 = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("Total: "))
        .and_then(|l| l.strip_suffix(" B"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("jeprof printed {text:?} {}", jeprof_out.stderr));
    let ours = common::run_ok(
        &[
            &["report", "--show_bytes"][..],
            &inputs.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    let want: f64 = ours
        .lines()
        .next()
        .unwrap()
        .strip_prefix("Total: ")
        .unwrap()
        .strip_suffix(" B")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (total - want).abs() / want < 1e-3,
        "jeprof says {total} B for the merge, the inputs hold {want} B"
    );
}

#[test]
fn merge_keeps_the_labels_every_dump_agrees_on_and_names_the_dropped_ones() {
    let dir = tempfile::tempdir().unwrap();
    let base = jeprof_dumpfmt::read::read_file(common::fixtures().join("symbolized.heap")).unwrap();
    let label = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let dumps = [
        label(&[
            ("service", "kv"),
            ("host", "a"),
            ("pid", "1"),
            ("region", "eu"),
        ]),
        label(&[
            ("host", "b"),
            ("service", "kv"),
            ("pid", "2"),
            ("region", "eu"),
        ]),
        label(&[("service", "kv"), ("host", "c"), ("pid", "3")]),
    ];
    let mut args = vec!["merge".to_string(), "-o".into()];
    let merged = dir.path().join("merged.heap");
    args.push(merged.display().to_string());
    for (i, labels) in dumps.iter().enumerate() {
        let mut p = base.clone();
        p.labels = labels.clone();
        let path = dir.path().join(format!("d{i}.heap"));
        jeprof_dumpfmt::write::write_file(&p, &path, &Default::default()).unwrap();
        args.push(path.display().to_string());
    }
    common::run_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = std::fs::read_to_string(&merged).unwrap();
    assert!(text.contains("# label service kv\n"), "{text}");
    assert!(
        text.contains("# dropped_labels: host,pid,region\n"),
        "{text}"
    );
    assert!(!text.contains("# label host"), "{text}");
    let back = jeprof_dumpfmt::read::parse(text.as_bytes()).unwrap();
    assert_eq!(back.labels, label(&[("service", "kv")]));

    // Merged with a dump of another service: no label is left, and the keys dropped before stay
    // dropped.
    let mut other = base.clone();
    other.labels = label(&[("service", "web")]);
    let other_path = dir.path().join("web.heap");
    jeprof_dumpfmt::write::write_file(&other, &other_path, &Default::default()).unwrap();
    let again = dir.path().join("again.heap");
    common::run_ok(&[
        "merge",
        "-o",
        again.to_str().unwrap(),
        merged.to_str().unwrap(),
        other_path.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&again).unwrap();
    assert!(!text.contains("# label "), "{text}");
    assert!(
        text.contains("# dropped_labels: host,pid,region,service\n"),
        "{text}"
    );
}
