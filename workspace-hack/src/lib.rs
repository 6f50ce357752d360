//! Feature unification for the workspace's builds; no code.
//!
//! Cargo builds a dependency with the union of the features that the packages of *one* build ask
//! of it. The workspace's builds select different packages and features: the whole workspace
//! (`cargo test --workspace`), jeprof-compat with its `sql` feature (DataFusion asks parquet,
//! arrow, syn, tokio, cc and others for more features), the shim with its `loom` feature (loom
//! asks regex-automata and log for more). Each such difference rebuilt the crate and everything
//! above it, the C build of jemalloc included, for every build in turn: most of CI's time went to
//! building the same crates again with slightly different features.
//!
//! This package's `Cargo.toml`, written by `cargo hakari generate`, asks every shared dependency
//! for the union of the features any of those builds asks for, so that each is built once. Only the
//! test support crate (`jeprof-conformance`, a development dependency of the shim and of
//! jeprof-compat) depends on it: the products (the shim, jeprof-dumpfmt, jeprof-compat's library
//! and binary, the preload library) are built for users with exactly the features they ask for.
