//! Fuzz target for the file entry point's streaming reader: through a tiny buffer it must agree
//! with the in-memory parse. `cargo +nightly fuzz run read_stream fuzz/corpus/read` from
//! `jeprof-compat/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    jeprof_compat::fuzzing::exercise_stream(data);
});
