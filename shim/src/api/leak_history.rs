//! The leak test's answer ([`crate::leak_suspects`]) and why it may have none.

use std::fmt;
use std::time::{Duration, SystemTime};

/// A stack whose live bytes are still growing, by the test of `jeprof_dumpfmt::leaks` over the
/// in-process history ([`crate::leak_suspects`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LeakSuspect {
    /// The user frame: the stack's first function from the leaf, once the allocator's frames
    /// are removed, that is not the standard library's or the allocator's
    /// (`jeprof_dumpfmt::frames::DEFAULT_HIDE`), as `jeprof-compat` charges flat by default (the
    /// charging engine, `jeprof_dumpfmt::charge`), named as its rows name it (` (inline)` for an
    /// inlined function).
    pub function: String,
    /// The stack's functions, leaf first (inlined ones included, suffixed ` (inline)`), without
    /// the allocator's frames.
    pub stack: Vec<String>,
    /// Growth over the test's window, in bytes per second.
    pub rate: f64,
    /// The rate's 95% interval.
    pub rate_95: (f64, f64),
    /// Live bytes at the last snapshot.
    pub live_bytes: f64,
    /// Their 95% interval.
    pub live_bytes_95: (f64, f64),
    /// When the current rise began (a snapshot's time).
    pub started: SystemTime,
    /// The test's p-value.
    pub p_value: f64,
}

/// Why [`crate::leak_suspects`] has no answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LeakHistoryError {
    /// `leak_interval` is 0 and no snapshot was recorded.
    Off,
    /// The history is still too short for the test.
    TooShort {
        /// Snapshots held.
        snapshots: usize,
        /// Snapshots the test needs (at the current `leak_interval`).
        needed: usize,
        /// About when there will be enough, from now.
        ready_in: Duration,
    },
    /// `leak_history` holds fewer snapshots than the test needs with these options.
    TooSmall {
        /// The `leak_history` setting.
        leak_history: usize,
        /// Snapshots the test needs.
        needed: usize,
    },
    /// The options are out of range.
    Options(String),
    /// The profiler does not run on this system (never on Linux; the message says which system
    /// and why).
    Unsupported(String),
}

impl fmt::Display for LeakHistoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeakHistoryError::Off => write!(
                f,
                "the leak history is off (leak_interval:0); set leak_interval to record one"
            ),
            LeakHistoryError::TooShort {
                snapshots,
                needed,
                ready_in,
            } => write!(
                f,
                "the leak history holds {snapshots} snapshots; the test needs {needed}, enough in \
                 about {:.1} s",
                ready_in.as_secs_f64()
            ),
            LeakHistoryError::TooSmall {
                leak_history,
                needed,
            } => write!(
                f,
                "leak_history:{leak_history} keeps fewer snapshots than the test needs ({needed}); \
                 raise it"
            ),
            LeakHistoryError::Options(why) => write!(f, "leak options: {why}"),
            LeakHistoryError::Unsupported(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for LeakHistoryError {}
