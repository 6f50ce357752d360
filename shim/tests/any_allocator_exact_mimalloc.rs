//! `ExactScopes<Profiled<MiMalloc>>`: exact per-scope figures in front of mimalloc.

mod common;

#[global_allocator]
static ALLOC: jeprof_shim::ExactScopes<jeprof_shim::Profiled<mimalloc::MiMalloc>> =
    jeprof_shim::ExactScopes::new(jeprof_shim::Profiled::new(mimalloc::MiMalloc));

#[test]
fn exact_scopes_over_mimalloc_equal_the_truth() {
    common::assert_exact_scopes_equal_the_truth(&ALLOC);
}
