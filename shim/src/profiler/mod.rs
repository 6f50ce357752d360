//! The top layer below `lib.rs`: the profiler, composed of the parts.
//!
//! Its modules import the parts and the bottom layers (`base`, and `api` for the public types),
//! and each other only bottom to top. Which module holds what, and which of its siblings each
//! uses, is the crate's module map (the README's "Source layout"), which `tests/module_layers.rs`
//! writes from the code and holds equal to it.

pub(crate) mod allocation_window;
pub(crate) mod allocator;
pub(crate) mod auto_dump;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod leak_history;
pub(crate) mod near_limit;
#[cfg(feature = "otlp")]
pub(crate) mod otlp_push;
pub(crate) mod otlp_stats;
pub(crate) mod peak;
pub(crate) mod pprof;
pub(crate) mod report;
pub(crate) mod rss;
pub(crate) mod sampled_path;
pub(crate) mod scopes;
pub(crate) mod setting_values;
pub(crate) mod settings_table;
