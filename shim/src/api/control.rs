//! The configuration error ([`crate::configure`]).

use std::fmt;

/// Why a configuration string was (partly) rejected. Every valid pair of the string was applied;
/// each rejected pair is listed with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// One message per rejected `key:value` pair.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "jeprof-shim: invalid configuration: {}",
            self.problems.join("; ")
        )
    }
}

impl std::error::Error for ConfigError {}
