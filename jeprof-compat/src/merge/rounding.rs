//! How a merged heap_v2 dump's figures become integers.

use jeprof_dumpfmt::write::HeaderPeriod;
use jeprof_dumpfmt::{Rounding, WriteOptions};

/// How a merged heap_v2 dump's figures become the integers jemalloc's format holds, R being its
/// header period (the smallest input period): the writer's choices ([`WriteOptions`]) the
/// `jeprof-compat merge --rounding` options stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OutputRounding {
    /// The entries whose jeprof figures are closest to the merged figures at period R (up to three
    /// per stack).
    #[default]
    Optimal,
    /// As [`OutputRounding::Optimal`], also trying header periods R/2 to R/64: the most accurate,
    /// and can be ten times slower.
    Best,
    /// jemalloc's own rounding, one entry per stack: the fastest, the least accurate.
    Nearest,
}

impl OutputRounding {
    /// The writer's options for this choice.
    pub fn write_options(self) -> WriteOptions {
        match self {
            // Optimal entries at R, the smallest input period (measured on 10 merged fleet dumps:
            // worst error 7e-5 in bytes, 3e-5 in objects per function).
            OutputRounding::Optimal => WriteOptions {
                header_period: HeaderPeriod::Sampling,
                ..WriteOptions::default()
            },
            OutputRounding::Best => WriteOptions::default(),
            OutputRounding::Nearest => WriteOptions {
                rounding: Rounding::Nearest,
                header_period: HeaderPeriod::Sampling,
                ..WriteOptions::default()
            },
        }
    }
}
