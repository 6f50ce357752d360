//! The public types, declared once for every target.
//!
//! The profiler runs on Linux only (see `elsewhere`), but its API is one: the types a caller
//! names (figures, options, errors, handles, the HTTP request and response) are declared here,
//! compile everywhere, and import nothing of the crate. The modules that produce them (Linux's
//! `parts`, `profiler`, `exact`, `http`, or `elsewhere`'s stubs) add the functions that differ;
//! each file here is named after the module that produces its types on Linux.
//!
//! The handles' private fields are `pub(crate)` so that those modules can build them; the ones
//! only Linux reads are allowed to be dead elsewhere.

pub(crate) mod allocation_window;
pub(crate) mod capture;
pub(crate) mod control;
pub(crate) mod exact;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod leak_history;
pub(crate) mod near_limit;
pub(crate) mod otlp_stats;
pub(crate) mod pprof;
pub(crate) mod report;
pub(crate) mod sampled_path;
pub(crate) mod scopes;
pub(crate) mod symbolize;
