//! The bodies of the fuzz targets (`fuzz/fuzz_targets/`) and of the corpus-replay test:
//!
//! - [`exercise`] (`read`): arbitrary bytes through the reader and, when they parse (strictly, or as
//!   a cut dump), through every report, the merge, the writer and pprof. Nothing may panic; a merged
//!   dump we write must read back, and so must a dump's labels, written again.
//! - [`exercise_stream`] (`read_stream`): the file entry point's streaming reader, fed through a
//!   7-byte buffer so that every line straddles reads, must agree exactly with the in-memory parse.
//! - [`exercise_pprof`] (`pprof`): profiles built straight from bytes (figures the parser would
//!   never produce: huge, tiny, zero; any frames, names and memory map) through the pprof writer,
//!   whose output must decode to a self-consistent profile.

use std::io::BufReader;

use jeprof_dumpfmt::read::ReadOptions;
use jeprof_dumpfmt::{Estimate, Profile, Stack, SymbolTable};

use crate::merge::Accumulator;
use crate::pprof;
use crate::report::{self, Measure, ReportOptions};
use crate::symbolize::{resolve, SymbolizeOptions};

/// Runs `bytes` through everything. Panics only on a bug.
pub fn exercise(bytes: &[u8]) {
    let lenient = ReadOptions {
        allow_truncated: true,
    };
    let strict = jeprof_dumpfmt::read::parse(bytes);
    let Ok(read) = jeprof_dumpfmt::read::read_with(bytes, &lenient) else {
        assert!(
            strict.is_err(),
            "a dump read strictly fails when cut ones are allowed"
        );
        return;
    };
    // Allowing cut dumps changes nothing about a whole one.
    match &strict {
        Ok(p) => {
            assert!(read.truncation.is_none(), "a whole dump reported as cut");
            assert_eq!(format!("{p:?}"), format!("{:?}", read.profile));
        }
        Err(e) => assert!(
            matches!(e, jeprof_dumpfmt::Error::Truncated { .. }),
            "only a cut dump reads with allow_truncated and not without: {e}"
        ),
    }
    let profile = read.profile;
    // Labels read are labels that can be written, and they come back unchanged.
    if let Ok(text) =
        jeprof_dumpfmt::write::to_string(&profile, &jeprof_dumpfmt::WriteOptions::default())
    {
        match jeprof_dumpfmt::read::parse(text.as_bytes()) {
            Ok(back) => assert_eq!(back.labels, profile.labels, "labels changed"),
            Err(e) => assert!(
                profile.labels.is_empty(),
                "a dump with labels, written again, does not read back: {e}\n{text}"
            ),
        }
    }
    // The merge's fast path must fold a dump exactly as resolving it and adding it does.
    let mut fast = Accumulator::new();
    fast.add_dump(profile.clone(), &SymbolizeOptions::default());
    fast.add_dump(profile.clone(), &SymbolizeOptions::default());
    let resolved = resolve(profile, "fuzz", &SymbolizeOptions::default());
    let profiles = [resolved];
    for measure in [
        Measure::InuseSpace,
        Measure::InuseObjects,
        Measure::AllocSpace,
        Measure::AllocObjects,
    ] {
        for show_bytes in [false, true] {
            let options = ReportOptions {
                measure,
                show_bytes,
                interval: true,
                ..ReportOptions::default()
            };
            let r = report::build(&profiles, &options);
            let _ = report::format_text(&r, &options);
            let _ = report::format_collapsed(&report::collapsed(&profiles, &options));
        }
    }
    let _ = pprof::write_gz(
        &pprof::build(&profiles, Default::default()),
        std::io::sink(),
    );
    let mut acc = Accumulator::new();
    acc.add(&profiles[0]);
    acc.add(&profiles[0]);
    // Compared as text, so that NaN figures compare equal to themselves.
    assert_eq!(
        format!("{:?}", fast.canonical()),
        format!("{:?}", acc.canonical()),
        "add_dump and resolve + add disagree"
    );
    let merged = acc.to_profile();
    if let Ok(text) =
        jeprof_dumpfmt::write::to_string(&merged, &jeprof_dumpfmt::WriteOptions::default())
    {
        if let Err(e) = jeprof_dumpfmt::read::parse(text.as_bytes()) {
            panic!("a merged dump we wrote does not read back: {e}\n{text}");
        }
    }
}

/// The streaming reader (what `read_file` runs over a file) through a 7-byte buffer agrees with
/// the in-memory parse: the same figures, or the same error.
pub fn exercise_stream(bytes: &[u8]) {
    for allow_truncated in [false, true] {
        let options = ReadOptions { allow_truncated };
        let whole = jeprof_dumpfmt::read::read_with(bytes, &options);
        let streamed =
            jeprof_dumpfmt::read::read_with(BufReader::with_capacity(7, bytes), &options);
        match (whole, streamed) {
            (Ok(a), Ok(b)) => {
                assert_eq!(format!("{:?}", a.profile), format!("{:?}", b.profile));
                assert_eq!(a.truncation, b.truncation);
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("in memory {a:?}, streamed {b:?}"),
        }
    }
}

/// Bytes as a source of values, zeros once they run out.
struct Draw<'a>(&'a [u8]);

impl Draw<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| (v << 8) | u64::from(self.byte()))
    }

    /// A finite, non-negative figure over the whole range: 0, tiny, ordinary, near `u64::MAX`,
    /// past it.
    fn figure(&mut self) -> f64 {
        let x = f64::from_bits(self.u64()).abs();
        if x.is_finite() {
            x
        } else {
            0.0
        }
    }

    fn text(&mut self) -> String {
        let len = usize::from(self.byte() % 24);
        (0..len)
            .map(|_| char::from(self.byte() % 95 + 32))
            .collect()
    }
}

/// A profile built from `bytes` (see `Draw`), written as pprof and decoded: every sample value
/// is one per sample type, and every location, function and string index it refers to exists.
pub fn exercise_pprof(bytes: &[u8]) {
    let mut draw = Draw(bytes);
    let mut profile = Profile::new(draw.u64().max(1));
    let mut symbols = SymbolTable::default();
    for _ in 0..draw.byte() % 16 {
        let frames: Vec<u64> = (0..draw.byte() % 6).map(|_| draw.u64() % 64).collect();
        for &f in &frames {
            if draw.byte() % 2 == 0 {
                symbols.names.insert(f, vec![draw.text()]);
            }
        }
        let mut stack = Stack {
            frames,
            ..Stack::default()
        };
        for e in [&mut stack.counts.inuse, &mut stack.counts.accum] {
            *e = Estimate {
                objects: draw.figure(),
                bytes: draw.figure(),
                objects_variance: draw.figure(),
                bytes_variance: draw.figure(),
            };
        }
        profile.stacks.push(stack);
    }
    if draw.byte() % 2 == 0 {
        profile.symbols = Some(symbols);
    }
    if draw.byte() % 2 == 0 {
        profile.mapped_libraries = Some(format!(
            "{:x}-{:x} r-xp {:08x} 00:00 0 /{}\n{}\n",
            draw.u64() % 64,
            draw.u64() % 128,
            draw.u64() % 4096,
            draw.text(),
            draw.text()
        ));
    }
    if profile.validate().is_err() {
        return;
    }
    let resolved = resolve(profile, "fuzz", &SymbolizeOptions::default());
    let pb = pprof::build(&[resolved], Default::default());
    let mut gz = Vec::new();
    pprof::write_gz(&pb, &mut gz).expect("writing to memory");
    let back = pprof::read_gz(&gz).expect("our pprof decodes");
    assert_eq!(back, pb);
    let strings = back.string_table.len() as i64;
    assert_eq!(back.string_table.first().map(String::as_str), Some(""));
    let locations: std::collections::HashSet<u64> = back.location.iter().map(|l| l.id).collect();
    let functions: std::collections::HashSet<u64> = back.function.iter().map(|f| f.id).collect();
    let mappings: std::collections::HashSet<u64> = back.mapping.iter().map(|m| m.id).collect();
    for s in &back.sample {
        assert_eq!(s.value.len(), back.sample_type.len());
        assert!(s.location_id.iter().all(|id| locations.contains(id)));
    }
    for l in &back.location {
        assert!(l.mapping_id == 0 || mappings.contains(&l.mapping_id));
        assert!(l
            .line
            .iter()
            .all(|line| functions.contains(&line.function_id)));
    }
    for f in &back.function {
        assert!((0..strings).contains(&f.name) && (0..strings).contains(&f.system_name));
    }
}
