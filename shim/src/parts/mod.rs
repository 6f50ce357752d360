//! The middle layer: the profiler's parts, each importing only the bottom layers ([`crate::base`],
//! and `crate::api` for the public types), never each other; the profiler, a layer up, composes them.
//!
//! - [`sampler`]: the per-thread byte countdown and its draw (the fast path);
//! - [`build_ids`]: the GNU build ids of the loaded objects, for pprof's mappings;
//! - [`capture`]: stack capture (frame pointers, the `.eh_frame` tables read with gimli — its
//!   child folder `capture/eh_frame_unwind/`: lookup, cache, walk, one file per architecture —
//!   and libgcc), and which of them `unwinder:auto` picks;
//! - [`sampled_arena`]: the jemalloc arena sampled objects live in, and the range `dealloc` checks;
//! - [`stacks`]: the interned stacks;
//! - [`live_samples`]: the sampled objects still live, by address;
//! - [`scopes`]: interned scope labels and each scope's allocated estimate;
//! - [`thread_totals`]: each thread's totals per stack, and their handover at thread exit;
//! - [`symbolize`]: in-process symbolization at dump time;
//! - [`triggers`]: the estimated allocated and live bytes, and the background writer's wake-up;
//! - [`windows`]: allocation windows (what was sampled and freed between a start and a stop).

pub(crate) mod build_ids;
pub(crate) mod capture;
pub(crate) mod live_samples;
pub(crate) mod sampled_arena;
pub(crate) mod sampler;
pub(crate) mod scopes;
pub(crate) mod stacks;
pub(crate) mod symbolize;
pub(crate) mod thread_totals;
pub(crate) mod triggers;
pub(crate) mod windows;
