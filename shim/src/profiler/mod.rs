//! The top layer below `lib.rs`: the profiler, composed of the parts.
//!
//! Its modules import the parts and the bottom layers (`base`, and `api` for the public types), and each other only in this order:
//! [`allocator`], [`setting_values`], [`peak`] and [`otlp_stats`] (nothing of the profiler) →
//! [`settings_table`] → [`leak_history`] → [`sampled_path`] → [`report`] → [`scopes`], [`window`], [`auto_dump`] and
//! [`pprof`] → `otlp_push` (feature `otlp`) → [`hooks`] → [`init`].
//!
//! - [`allocator`]: the allocator's figures at a dump's moment, and which allocator holds the
//!   program's heap;
//! - [`setting_values`]: the parsers of settings' values as people type them (sizes with units,
//!   paths checked when read, host names, program names, `%p`);
//! - [`settings_table`]: the one table of settings (key, default, doc, parser), from which
//!   `JEPROF_SHIM`'s reader, [`crate::configure`], the unknown-key error and the manual's table
//!   are made; the setters that restart the threads' countdowns;
//! - [`peak`]: the peak tracker (the live samples at the highest live bytes);
//! - [`leak_history`]: the ring of per-stack live sums over time, and the leak test over it;
//! - [`sampled_path`]: capture, allocate from the sampled arena, record; frees of sampled objects;
//! - [`report`]: snapshots, statistics and dumps;
//! - [`scopes`]: memory per scope (guards, the future wrapper, per-scope figures and dumps);
//! - [`window`]: allocation windows' tokens and profiles;
//! - [`auto_dump`]: sequenced dumps (interval, peak, manual, final) and the background writer;
//! - [`pprof`]: profiles in pprof form, with the labels that name the process;
//! - [`otlp_stats`]: what `otlp_push` has done; `otlp_push` (feature `otlp`): the thread that
//!   sends OpenTelemetry profiles every `otlp_interval`;
//! - [`hooks`]: the fork handlers and the exit hook;
//! - [`init`]: initialisation at first use.

pub(crate) mod allocator;
pub(crate) mod auto_dump;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod leak_history;
#[cfg(feature = "otlp")]
pub(crate) mod otlp_push;
pub(crate) mod otlp_stats;
pub(crate) mod peak;
pub(crate) mod pprof;
pub(crate) mod report;
pub(crate) mod sampled_path;
pub(crate) mod scopes;
pub(crate) mod setting_values;
pub(crate) mod settings_table;
pub(crate) mod window;
