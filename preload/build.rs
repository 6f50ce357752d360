//! Builds `src/countdown.c`: the thread's sample countdown in initial-exec thread-local storage
//! (`src/countdown.rs` says why).

fn main() {
    println!("cargo:rerun-if-changed=src/countdown.c");
    cc::Build::new()
        .file("src/countdown.c")
        .flag("-ftls-model=initial-exec")
        .opt_level(2)
        .compile("jeprof_preload_countdown");
}
