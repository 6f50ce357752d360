//! Property tests: generated profiles (random stacks made of random samples, thread lines, header
//! threads with names, symbols, maps, labels) survive write → read with every figure within the bound the
//! encoding promises and never panic; stacks of at least 2·R come back within 0.1% with the
//! default rounding; and no input, however broken, makes the reader panic.

use jeprof_dumpfmt::encode::{encode_pair, relative_error, Rounding};
use jeprof_dumpfmt::model::symbol_key;
use jeprof_dumpfmt::write::HeaderPeriod;
use jeprof_dumpfmt::{
    Counts, Estimate, Profile, Stack, SymbolTable, ThreadCounts, ThreadSummary, WriteOptions,
};
use proptest::prelude::*;

/// One sampled allocation: size, thread, still live at the dump.
type Sample = (u64, u64, bool);

/// Sizes log-uniform from `2^min_log2` bytes to 64 MiB.
fn sample(min_log2: f64) -> impl Strategy<Value = Sample> {
    (
        (min_log2..26.0).prop_map(|e| e.exp2() as u64),
        0u64..4,
        any::<bool>(),
    )
}

fn stack_spec(min_log2: f64) -> impl Strategy<Value = (Vec<u64>, Vec<Sample>)> {
    (
        prop::collection::vec(1u64..0x7fff_ffff_ffff, 1..40),
        prop::collection::vec(sample(min_log2), 1..60),
    )
}

fn build(
    period: u64,
    stacks: &[(Vec<u64>, Vec<Sample>)],
    names: &[Option<String>],
    with_symbols: bool,
    maps: Option<String>,
) -> Profile {
    let mut profile = Profile::new(period);
    for (frames, samples) in stacks {
        let mut stack = Stack {
            frames: frames.clone(),
            ..Stack::default()
        };
        for &(size, thread, live) in samples {
            let one = Estimate::of_sample(size as f64, period as f64);
            let mut add = Counts::default();
            add.accum.add(&one);
            if live {
                add.inuse.add(&one);
            }
            stack.counts.add(&add);
            match stack.threads.iter_mut().find(|t| t.thread == thread) {
                Some(t) => t.counts.add(&add),
                None => stack.threads.push(ThreadCounts {
                    thread,
                    counts: add,
                }),
            }
        }
        profile.stacks.push(stack);
    }
    for (thread, name) in names.iter().enumerate() {
        let mut counts = Counts::default();
        for s in &profile.stacks {
            for t in s.threads.iter().filter(|t| t.thread == thread as u64) {
                counts.add(&t.counts);
            }
        }
        profile.threads.push(ThreadSummary {
            thread: thread as u64,
            counts,
            name: name.clone(),
        });
    }
    if with_symbols {
        let mut table = SymbolTable {
            binary: Some("prop".into()),
            ..SymbolTable::default()
        };
        for key in profile.symbol_keys().into_iter().step_by(2) {
            table.names.insert(
                key,
                vec![format!("f{key:x}"), format!("outer::g{}", key % 7)],
            );
        }
        profile.symbols = Some(table);
    }
    profile.mapped_libraries = maps;
    profile
}

fn header_period(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("heap_v2/"))
        .and_then(|p| p.trim().parse().ok())
        .expect("a heap_v2 header")
}

fn rel_error(got: &Estimate, want: &Estimate) -> f64 {
    let r = |g: f64, w: f64| if w == 0.0 { g.abs() } else { (g - w).abs() / w };
    r(got.objects, want.objects).max(r(got.bytes, want.bytes))
}

/// Any period, samples from 1 byte.
fn profile_strategy() -> impl Strategy<Value = Profile> {
    profile_strategy_with(vec![1u64, 4096, 65_536, 524_288, 1 << 20, 1 << 23], 0.0)
}

fn profile_strategy_with(periods: Vec<u64>, min_log2: f64) -> impl Strategy<Value = Profile> {
    (
        prop::sample::select(periods),
        prop::collection::vec(stack_spec(min_log2), 0..10),
        prop::collection::vec(prop::option::of("[a-z][a-z0-9-]{0,14}"), 0..4),
        any::<bool>(),
        prop::option::of(
            "([0-9a-f]{8}-[0-9a-f]{8} r-xp 00000000 00:00 0 /usr/lib/x[a-z]{0,8}\\.so\n){0,4}",
        ),
        // Labels: any key the format allows, any value without a line break (spaces at either
        // end, `#`, `:`, non-ASCII text included).
        prop::collection::btree_map("[A-Za-z0-9_.-]{1,12}", "[^\n\r]{0,24}", 0..5),
    )
        .prop_map(|(period, stacks, names, symbols, maps, labels)| {
            let mut profile = build(period, &stacks, &names, symbols, maps);
            profile.labels = labels.into_iter().collect();
            profile
        })
}

fn check_round_trip(profile: &Profile, options: &WriteOptions) -> Result<(), TestCaseError> {
    let text = jeprof_dumpfmt::write::to_string(profile, options)
        .map_err(|e| TestCaseError::fail(format!("write: {e}")))?;
    let header = header_period(&text);
    let mut back = jeprof_dumpfmt::read::parse(text.as_bytes())
        .map_err(|e| TestCaseError::fail(format!("read: {e}\n{text}")))?;
    back.coalesce();
    let mut original = profile.clone();
    original.coalesce();
    prop_assert_eq!(back.sample_period, original.sample_period);
    prop_assert_eq!(&back.symbols, &original.symbols);
    prop_assert_eq!(&back.mapped_libraries, &original.mapped_libraries);
    prop_assert_eq!(&back.labels, &original.labels);
    let names = |p: &Profile| -> Vec<(u64, Option<String>)> {
        p.threads
            .iter()
            .map(|t| (t.thread, t.name.clone()))
            .collect()
    };
    prop_assert_eq!(names(&back), names(&original));
    for s in original.stacks.iter().filter(|s| !s.counts.is_zero()) {
        let b = back.stacks.iter().find(|b| b.frames == s.frames);
        prop_assert!(b.is_some(), "stack lost");
        let b = b.expect("checked");
        for (got, want) in [
            (&b.counts.inuse, &s.counts.inuse),
            (&b.counts.accum, &s.counts.accum),
        ] {
            let pairs = encode_pair(want.objects, want.bytes, header, options.rounding);
            let bound = relative_error(&pairs, want.objects, want.bytes, header) + 1e-9;
            let err = rel_error(got, want);
            prop_assert!(
                err <= bound,
                "error {} above the encoding's bound {} for {:?}, read {:?}",
                err,
                bound,
                want,
                got
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn generated_profiles_survive_write_then_read_within_the_encoding_bound(
        profile in profile_strategy()
    ) {
        check_round_trip(&profile, &WriteOptions::default())?;
        check_round_trip(&profile, &WriteOptions {
            rounding: Rounding::Nearest,
            symbols: true,
            header_period: HeaderPeriod::Sampling,
            ..WriteOptions::default()
        })?;
    }

    // What jemalloc can produce: samples of at least 8 bytes (its smallest size class), periods
    // of at least 4 KiB. Outside that the goal is not met today: at R = 1 a one-object entry
    // carries f(s) = 1/(1 − e^(−s)) objects for integer s only (1.58, 1.16, …), and 1-byte
    // samples at R = 4096 give stacks like encode_pair(4638.9590553951375, 16674.75993360441,
    // 4096, Optimal), 0.27% off.
    #[test]
    fn stacks_of_at_least_two_periods_come_back_within_a_thousandth(
        profile in profile_strategy_with(vec![4096, 65_536, 524_288, 1 << 20, 1 << 23], 3.0)
    ) {
        let text = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default())
            .map_err(|e| TestCaseError::fail(format!("write: {e}")))?;
        let mut back = jeprof_dumpfmt::read::parse(text.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("read: {e}")))?;
        back.coalesce();
        // Entries that share frames are one stack to jeprof.
        let mut profile = profile;
        profile.coalesce();
        let floor = 2.0 * profile.sample_period as f64;
        for s in &profile.stacks {
            let b = back.stacks.iter().find(|b| b.frames == s.frames);
            for (got, want) in [
                (b.map(|b| b.counts.inuse), s.counts.inuse),
                (b.map(|b| b.counts.accum), s.counts.accum),
            ] {
                if want.bytes < floor {
                    continue;
                }
                let got = got.unwrap_or_default();
                let err = rel_error(&got, &want);
                prop_assert!(err <= 1e-3, "error {} for {:?}, read {:?}", err, want, got);
            }
        }
    }

    #[test]
    fn encoding_spread_over_threads_writes_the_same_dump_byte_for_byte(
        profile in profile_strategy(),
        jobs in 2usize..5,
    ) {
        let write = |jobs| {
            jeprof_dumpfmt::write::to_string(&profile, &WriteOptions { jobs, ..WriteOptions::default() })
                .map_err(|e| TestCaseError::fail(format!("write: {e}")))
        };
        prop_assert_eq!(write(1)?, write(jobs)?);
    }

    #[test]
    fn random_bytes_never_make_the_reader_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2048)
    ) {
        let _ = jeprof_dumpfmt::read::parse(&bytes);
    }

    #[test]
    fn corrupted_dumps_never_make_the_reader_panic(
        profile in profile_strategy(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
    ) {
        let mut bytes = jeprof_dumpfmt::write::to_string(&profile, &WriteOptions::default())
            .map_err(|e| TestCaseError::fail(format!("write: {e}")))?
            .into_bytes();
        for (at, byte, op) in edits {
            if bytes.is_empty() {
                bytes.push(byte);
                continue;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        let _ = jeprof_dumpfmt::read::parse(&bytes);
    }
}

#[test]
fn symbol_keys_are_what_jeprof_looks_up() {
    // Leaf as written, callers minus one.
    assert_eq!(symbol_key(0, 0x401000), 0x401000);
    assert_eq!(symbol_key(3, 0x401000), 0x400fff);
}
