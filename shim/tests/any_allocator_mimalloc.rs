//! `Profiled<MiMalloc>`: the shim in front of mimalloc estimates as it does in front of jemalloc
//! (sampled blocks live in the shim's jemalloc arena, the rest in mimalloc's heaps).

mod common;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<mimalloc::MiMalloc> =
    jeprof_shim::Profiled::new(mimalloc::MiMalloc);

#[test]
fn mean_estimates_in_front_of_mimalloc_are_within_2_percent_over_24_seeds() {
    common::assert_two_sites_unbiased_over_seeds();
}
