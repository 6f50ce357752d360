//! The streaming reader (`read_stacks_with`) hands each stack over complete, valid, with the
//! profile's final period and before the memory map, as soon as the next record starts, on every
//! fixture whole and cut anywhere; and it reads what `read_with` reads, with the same errors.
//! (An integration test: it reads the workspace's `fixtures/`, which the published crate does not
//! carry.)

use std::path::Path;

use jeprof_dumpfmt::read::{read_stacks_with, read_with, ReadOptions};
use jeprof_dumpfmt::Profile;

/// What `read_stacks_with` gives: the profile with the stacks it handed over, checking that
/// each was handed over with the profile's final period, before the memory map, and valid.
fn streamed(input: &[u8], options: &ReadOptions) -> Result<Profile, String> {
    let mut stacks = Vec::new();
    let mut periods = Vec::new();
    let read = read_stacks_with(input, options, |so_far, stack| {
        assert!(so_far.stacks.is_empty(), "stacks kept");
        assert!(
            so_far.mapped_libraries.is_none(),
            "handed over after the map"
        );
        assert!(
            Profile {
                stacks: vec![stack.clone()],
                ..Profile::default()
            }
            .validate()
            .is_ok(),
            "invalid figures handed over: {stack:?}"
        );
        periods.push(so_far.sample_period);
        stacks.push(stack);
    })
    .map_err(|e| e.to_string())?;
    assert!(read.profile.stacks.is_empty());
    assert!(
        periods.iter().all(|&p| p == read.profile.sample_period),
        "periods {periods:?}, final {}",
        read.profile.sample_period
    );
    let mut profile = read.profile;
    profile.stacks = stacks;
    Ok(profile)
}

#[test]
fn every_stack_is_handed_over_complete_valid_and_before_the_map_on_every_fixture_whole_and_cut() {
    // `read_with` collects what `read_stacks_with` hands over, so the two agree by
    // construction; what this checks is `streamed`'s invariants on every way a dump can end.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut checked = 0;
    for dir in ["synthetic", "real", "compat", "malformed"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "heap"))
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).expect("fixture");
            for allow_truncated in [false, true] {
                let options = ReadOptions { allow_truncated };
                // Cut anywhere: inside a stack, a counts line, the symbol section, the map.
                let step = (bytes.len() / 37).max(1);
                for cut in (1..bytes.len()).step_by(step).chain([bytes.len()]) {
                    let input = &bytes[..cut];
                    let whole = read_with(input, &options)
                        .map(|r| r.profile)
                        .map_err(|e| e.to_string());
                    assert_eq!(streamed(input, &options), whole, "{path:?} cut at {cut}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} fixtures");
}

/// Counts the bytes taken from the inner reader.
struct Counting<'a> {
    inner: &'a [u8],
    taken: std::rc::Rc<std::cell::Cell<usize>>,
}

impl std::io::Read for Counting<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(out)?;
        self.taken.set(self.taken.get() + n);
        Ok(n)
    }
}

#[test]
fn each_stack_is_handed_over_once_the_next_one_starts_not_at_the_end_of_the_dump() {
    let mut dump = String::from("heap_v2/524288\n  t*: 0: 0 [0: 0]\n");
    // Where the `@` line of each stack ends: the stack before it is complete there.
    let mut complete_at = Vec::new();
    for i in 0..1000u64 {
        dump.push_str(&format!("@ 0x{:x} 0x{:x}\n", 0x1000 + i, 0x2000 + i));
        complete_at.push(dump.len());
        dump.push_str("  t*: 1: 524288 [0: 0]\n");
    }
    dump.push_str("MAPPED_LIBRARIES:\n");
    complete_at.remove(0);
    complete_at.push(dump.len());
    let taken = std::rc::Rc::new(std::cell::Cell::new(0));
    let input = Counting {
        inner: dump.as_bytes(),
        taken: taken.clone(),
    };
    const BUFFER: usize = 64;
    let mut taken_at = Vec::new();
    read_stacks_with(
        std::io::BufReader::with_capacity(BUFFER, input),
        &ReadOptions::default(),
        |_, _| taken_at.push(taken.get()),
    )
    .expect("dump reads");
    assert_eq!(taken_at.len(), 1000);
    for (i, (&taken, &complete)) in taken_at.iter().zip(&complete_at).enumerate() {
        assert!(
            taken <= complete + BUFFER,
            "stack {i} handed over after reading {taken} bytes; complete at {complete}"
        );
    }
}

#[test]
fn streamed_reading_keeps_bare_stacks_variances_threads_and_the_error_order() {
    let options = ReadOptions::default();
    // A bare `@` repeats the previous stack's frames as an entry of its own; per-thread lines
    // and `# var` lines belong to the stack before them; the period is the annotation's.
    let profile = streamed(
        b"heap_v2/524288\n  t*: 2: 20 [0: 0]\n# sample_period: 1024\n\
          @ 0x1 0x2\n# var 1 2 3 4\n  t*: 1: 10 [0: 0]\n  t1: 1: 10 [0: 0]\n\
          @\n  t*: 1: 10 [0: 0]\nMAPPED_LIBRARIES:\n",
        &options,
    )
    .expect("reads");
    assert_eq!(profile.sample_period, 1024);
    assert_eq!(profile.stacks.len(), 2);
    assert_eq!(profile.stacks[0].frames, [1, 2]);
    assert_eq!(profile.stacks[1].frames, [1, 2]);
    assert_eq!(profile.stacks[0].counts.inuse.bytes_variance, 2.0);
    assert_eq!(profile.stacks[0].threads.len(), 1);
    assert!(profile.stacks[1].threads.is_empty());

    // Figures that are not finite are an error, but a later bad line is the one reported
    // (`read_with` always checked figures last).
    let overflow = "heap_v2/1\n@ 0x1\n  t*: 18446744073709551615: 1 [0: 0]\n";
    let err =
        streamed(format!("{overflow}@ 0x2\n  junk\n").as_bytes(), &options).expect_err("bad line");
    assert!(err.starts_with("line 5: expected "), "{err}");
    let err = streamed(
        format!("{overflow}MAPPED_LIBRARIES:\n").as_bytes(),
        &options,
    )
    .expect_err("infinite figures");
    assert!(
        err.contains("stack 0: every figure must be finite"),
        "{err}"
    );

    // A stack without figures at the end: a cut dump, dropped when that is allowed.
    let cut = b"heap_v2/1\n@ 0x1\n  t*: 1: 1 [0: 0]\n@ 0x2\n";
    let err = streamed(cut, &options).expect_err("cut");
    assert!(err.contains("it was cut"), "{err}");
    let allowed = ReadOptions {
        allow_truncated: true,
    };
    assert_eq!(streamed(cut, &allowed).expect("allowed").stacks.len(), 1);
}
