//! `ExactScopes<Profiled<System>>`: exact per-scope figures in front of the system allocator.

mod common;

#[global_allocator]
static ALLOC: jeprof_shim::ExactScopes<jeprof_shim::Profiled<std::alloc::System>> =
    jeprof_shim::ExactScopes::new(jeprof_shim::Profiled::new(std::alloc::System));

#[test]
fn exact_scopes_over_the_system_allocator_equal_the_truth() {
    common::assert_exact_scopes_equal_the_truth(&ALLOC);
}
