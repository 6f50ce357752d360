//! The library's one error type.

use std::fmt;

/// Everything that can go wrong in this library: reading a dump (what [`jeprof_dumpfmt`] reports,
/// naming the file and line, or a file that is not pprof), drawing a flame graph.
///
/// Its `Display` text is what the `jeprof-compat` binary prints after `jeprof-compat: `, so a
/// message says what to fix without its source chain; [`std::error::Error::source`] still gives the
/// underlying error where there is one.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading (or writing) a dump failed: not a heap_v2 dump, a broken or cut line, a profile
    /// that breaks the model's invariants, or I/O on the file. Shown as the reader's own message
    /// (the file, the line, what was expected).
    Dump(jeprof_dumpfmt::Error),
    /// [`crate::report::flamegraph`]: no folded stack holds a whole unit, so there is nothing to
    /// draw (inferno draws whole units only).
    NothingToDraw {
        /// The unit of the measure drawn (`objects` or `B`).
        unit: &'static str,
    },
    /// [`crate::report::flamegraph`]: inferno failed, writing the SVG included.
    Flamegraph(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The reader's message is already complete (file, line, what was wrong).
            Error::Dump(e) => write!(f, "{e}"),
            Error::NothingToDraw { unit } => {
                write!(f, "nothing to draw: no stack holds at least one {unit}")
            }
            Error::Flamegraph(e) => write!(f, "drawing the flame graph: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the dump error's text is this error's text, so its source is ours.
            Error::Dump(e) => std::error::Error::source(e),
            Error::Flamegraph(e) => Some(e),
            Error::NothingToDraw { .. } => None,
        }
    }
}

impl From<jeprof_dumpfmt::Error> for Error {
    fn from(e: jeprof_dumpfmt::Error) -> Error {
        Error::Dump(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{self, Measure, ReportOptions};

    #[test]
    fn a_dump_error_reads_as_the_readers_own_message() {
        let dump_error = jeprof_dumpfmt::read::parse(b"garbage\n").unwrap_err();
        let text = dump_error.to_string();
        assert!(text.contains("not a jemalloc heap_v2 dump"), "{text}");
        assert_eq!(Error::from(dump_error).to_string(), text);
    }

    #[test]
    fn a_flame_graph_without_a_whole_unit_says_there_is_nothing_to_draw() {
        let options = ReportOptions {
            measure: Measure::InuseObjects,
            ..Default::default()
        };
        let lines = [("main;leaf".to_string(), 0.5)];
        let mut svg = Vec::new();
        let error = report::flamegraph(&lines, &options, "t", &mut svg).unwrap_err();
        assert!(matches!(error, Error::NothingToDraw { unit: "objects" }));
        assert_eq!(
            error.to_string(),
            "nothing to draw: no stack holds at least one objects"
        );
        assert!(svg.is_empty());
    }

    #[test]
    fn bytes_that_are_not_gzip_are_a_pprof_error() {
        let error = Error::from(crate::pprof::read_gz(b"not gzip").unwrap_err());
        assert!(
            matches!(error, Error::Dump(jeprof_dumpfmt::Error::Pprof(_))),
            "{error:?}"
        );
    }
}
