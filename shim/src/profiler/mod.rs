//! The top layer below `lib.rs`: the profiler, composed of the parts.
//!
//! Its modules import the parts and the bottom layer, and each other only in this order:
//! [`control`] and [`sampled_path`] (nothing of the profiler) → [`report`] → [`hooks`] →
//! [`init`].
//!
//! - [`control`]: parsing `JEPROF_SHIM` and [`crate::configure`]'s string, and the setters that
//!   restart the threads' countdowns;
//! - [`sampled_path`]: capture, allocate from the sampled arena, record; frees of sampled objects;
//! - [`report`]: snapshots, statistics and dumps;
//! - [`hooks`]: the fork handlers and the exit hook;
//! - [`init`]: initialisation at first use.

pub(crate) mod control;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod report;
pub(crate) mod sampled_path;
