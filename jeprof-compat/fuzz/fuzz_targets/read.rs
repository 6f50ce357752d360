//! Fuzz target for the dump reader and everything downstream of it.
//! `cargo +nightly fuzz run read fuzz/corpus/read` from `jeprof-compat/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    jeprof_compat::fuzzing::exercise(data);
});
