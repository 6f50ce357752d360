//! With the feature `initial-exec` (jeprof-preload's), builds `src/c_api/countdown.c`: the
//! thread's sample countdown in initial-exec thread-local storage (`src/c_api/initial_exec.rs`
//! says why). Without it, nothing.

fn main() {
    println!("cargo:rerun-if-changed=src/c_api/countdown.c");
    if std::env::var_os("CARGO_FEATURE_INITIAL_EXEC").is_none() {
        return;
    }
    cc::Build::new()
        .file("src/c_api/countdown.c")
        .flag("-ftls-model=initial-exec")
        .opt_level(2)
        .compile("jeprof_preload_countdown");
}
