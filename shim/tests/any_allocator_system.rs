//! `Profiled<System>`: the shim in front of the system allocator estimates as it does in front of
//! jemalloc (sampled blocks live in the shim's jemalloc arena, the rest in glibc's heap).

mod common;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<std::alloc::System> =
    jeprof_shim::Profiled::new(std::alloc::System);

#[test]
fn mean_estimates_in_front_of_the_system_allocator_are_within_2_percent_over_24_seeds() {
    common::assert_two_sites_unbiased_over_seeds();
}
