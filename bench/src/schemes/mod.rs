//! Sampling schemes evaluated on the error of the estimate (`scheme-report`, `docs/design.md` §17).
//!
//! An evaluation build, not the production fast path: a [`Scheme`](scheme::Scheme) decides per
//! allocation whether it is sampled and with what inclusion probability; [`evaluate`] replays a
//! [`Trace`](trace::Trace) (an allocation stream with real allocator addresses and the exact live
//! bytes per call site) through each scheme over many seeds and compares the Horvitz–Thompson
//! estimates and their 95% intervals with the truth. The traces come from the published synthetic
//! workloads run in-process ([`workloads`]) and from real servers recorded with heaptrack
//! ([`heaptrack`]); [`report`] writes the Markdown report and its figures ([`plot`]).

pub mod evaluate;
pub mod heaptrack;
pub mod plot;
pub mod report;
pub mod scheme;
pub mod trace;
pub mod workloads;
