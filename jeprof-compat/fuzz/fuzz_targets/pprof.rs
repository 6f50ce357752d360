//! Fuzz target for the pprof writer's input: profiles built straight from bytes, written and
//! decoded. `cargo +nightly fuzz run pprof fuzz/corpus/pprof` from `jeprof-compat/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    jeprof_compat::fuzzing::exercise_pprof(data);
});
