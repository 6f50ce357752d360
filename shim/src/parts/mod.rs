//! The middle layer: the profiler's parts, each importing only the bottom layers ([`crate::base`],
//! and `crate::api` for the public types); the profiler, a layer up, composes them. Parts do not
//! import each other, with one exception: [`thread_totals`] caches [`live_samples`]'s sampling
//! probability per size. The crate's module map (the README's "Source layout",
//! written from the code by `tests/module_layers.rs`) says what each part holds and what it uses.

pub(crate) mod allocation_windows;
pub(crate) mod build_ids;
pub(crate) mod capture;
pub(crate) mod cgroup;
pub(crate) mod live_samples;
pub(crate) mod pagemap;
pub(crate) mod sampled_arena;
pub(crate) mod sampler;
pub(crate) mod scopes;
pub(crate) mod stacks;
pub(crate) mod symbolize;
pub(crate) mod thread_totals;
pub(crate) mod triggers;
