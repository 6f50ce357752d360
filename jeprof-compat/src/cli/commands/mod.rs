//! One runner per subcommand: each takes its parsed arguments, makes the library's options of them
//! ([`crate::cli::options`]), calls the library and writes what it returns ([`crate::cli::output`]).

pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod leaks;
pub(crate) mod merge;
pub(crate) mod otlp;
pub(crate) mod pprof;
pub(crate) mod query;
pub(crate) mod report;
pub(crate) mod symbolize;
