//! With the feature `initial-exec` (jeprof-preload's), builds `src/c_api/countdown.c`: the
//! thread's sample countdown in initial-exec thread-local storage (`src/c_api/initial_exec.rs`
//! says why). Without it, nothing.

fn main() {
    println!("cargo:rerun-if-changed=src/c_api/countdown.c");
    // `cc` is an optional build-dependency, present only with the feature.
    #[cfg(feature = "initial-exec")]
    cc::Build::new()
        .file("src/c_api/countdown.c")
        .flag("-ftls-model=initial-exec")
        .opt_level(2)
        .compile("jeprof_preload_countdown");
}
