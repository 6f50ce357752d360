//! Empty: cargo considers a package's build dependencies (the host-side half of the unification,
//! see src/lib.rs) only when the package has a build script.
fn main() {}
