//! Packs the library's relative relocations (`-z pack-relative-relocs`, `DT_RELR`) when the C
//! library it is built for can load them (glibc 2.36 and later, which the linker then names as a
//! version the library needs). The library has about 16,600 relative relocations (vtables and
//! tables of pointers): as `R_X86_64_RELATIVE` entries they are 400 KB that the loader reads in
//! every process the library is preloaded into, a third of what a preloaded `ls` costs in peak RSS
//! over Debian's jemalloc; packed, a few KB (issue 38 item 2, `bench/RESULTS.md`).
//!
//! Only in a native build for Linux with glibc (the target is the host), where `getconf` says
//! which glibc the library will be linked against; a cross build (`.ci/aarch64.sh`) keeps plain
//! relocations, which every glibc loads.

use std::process::Command;

/// The first glibc whose loader reads `DT_RELR`.
const RELR_GLIBC: (u32, u32) = (2, 36);

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let native = std::env::var("TARGET").ok() == std::env::var("HOST").ok();
    let gnu_linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if native && gnu_linux && glibc().is_some_and(|v| v >= RELR_GLIBC) {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,pack-relative-relocs");
    }
}

/// The host's glibc version, from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn glibc() -> Option<(u32, u32)> {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}
