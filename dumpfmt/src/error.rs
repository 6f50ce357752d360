//! The crate's one error type.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong reading or writing a dump.
///
/// "Not a heap_v2 dump at all" ([`Error::NotHeapV2`]) is kept apart from "a heap_v2 dump with a broken
/// line" ([`Error::Malformed`]), so a tool fed a directory of mixed files can skip the former and
/// report the latter.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The input is not a heap_v2 dump (empty, binary, a CPU profile, a gperftools heap profile…).
    NotHeapV2 {
        /// The file, when reading one.
        file: Option<PathBuf>,
        /// What was found instead.
        found: String,
    },
    /// A heap_v2 dump with a line that does not parse.
    Malformed {
        /// The file, when reading one.
        file: Option<PathBuf>,
        /// 1-based line number.
        line_number: usize,
        /// The offending line (truncated to 200 characters).
        line: String,
        /// What the reader expected there.
        expected: String,
    },
    /// A heap_v2 dump that was cut while being written (it ends inside a line, after a stack
    /// without its counts, or without the section its writer puts last). Read one anyway with
    /// [`crate::read::ReadOptions::allow_truncated`].
    Truncated {
        /// The file, when reading one.
        file: Option<PathBuf>,
        /// 1-based number of the line where the dump ends (or of its stack without counts).
        line_number: usize,
        /// How it ends, in words.
        what: String,
    },
    /// A profile that breaks the model's invariants (non-finite or negative figures).
    Invalid(String),
    /// Bytes that should be a gzipped pprof `profile.proto` message are not one.
    Pprof(String),
    /// Bytes that should be an OTLP `ExportProfilesServiceRequest` are not one ([`crate::otlp`]).
    Otlp(String),
    /// The leak test cannot run on this series or with these options ([`crate::leaks`]): too
    /// few dumps in its window, times out of order, an option out of range.
    LeakTest(String),
    /// A dump lacks an annotation a reader needs, or holds one it cannot read (the allocator's
    /// figures, [`crate::allocator`]).
    Annotation {
        /// The file, when reading one.
        file: Option<PathBuf>,
        /// The annotation's key.
        key: String,
        /// What is wrong with it and, when it is missing, how to get it.
        problem: String,
    },
    /// The operation cannot be done on this system: what was asked and why (jeprof-shim's
    /// profiling calls off Linux).
    Unsupported(String),
    /// Reading or writing failed.
    Io {
        /// The file, when reading or writing one.
        file: Option<PathBuf>,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// Attaches a file name to an error that lacks one.
    pub fn in_file(mut self, path: impl Into<PathBuf>) -> Error {
        match &mut self {
            Error::NotHeapV2 { file, .. }
            | Error::Malformed { file, .. }
            | Error::Truncated { file, .. }
            | Error::Annotation { file, .. }
            | Error::Io { file, .. } => {
                if file.is_none() {
                    *file = Some(path.into());
                }
            }
            Error::Invalid(_)
            | Error::Pprof(_)
            | Error::Otlp(_)
            | Error::LeakTest(_)
            | Error::Unsupported(_) => {}
        }
        self
    }

    /// An [`Error::Annotation`] without a file.
    pub(crate) fn annotation(key: &str, problem: impl Into<String>) -> Error {
        Error::Annotation {
            file: None,
            key: key.to_string(),
            problem: problem.into(),
        }
    }
}

fn prefix(f: &mut fmt::Formatter<'_>, file: &Option<PathBuf>) -> fmt::Result {
    match file {
        Some(p) => write!(f, "{}: ", p.display()),
        None => Ok(()),
    }
}

/// `file:line: `, or `line N: ` without a file.
fn at_line(f: &mut fmt::Formatter<'_>, file: &Option<PathBuf>, line_number: usize) -> fmt::Result {
    match file {
        Some(p) => write!(f, "{}:{line_number}: ", p.display()),
        None => write!(f, "line {line_number}: "),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotHeapV2 { file, found } => {
                prefix(f, file)?;
                write!(f, "not a jemalloc heap_v2 dump: {found}")
            }
            Error::Malformed {
                file,
                line_number,
                line,
                expected,
            } => {
                at_line(f, file, *line_number)?;
                write!(f, "expected {expected}, found {line:?}")
            }
            Error::Truncated {
                file,
                line_number,
                what,
            } => {
                at_line(f, file, *line_number)?;
                write!(f, "truncated dump: {what}")
            }
            Error::Annotation { file, key, problem } => {
                prefix(f, file)?;
                write!(f, "annotation `{key}` {problem}")
            }
            Error::Invalid(what) => write!(f, "invalid profile: {what}"),
            Error::Pprof(what) => write!(f, "not a pprof profile: {what}"),
            Error::Otlp(what) => write!(f, "not an OTLP profiles request: {what}"),
            Error::LeakTest(what) => write!(f, "{what}"),
            Error::Unsupported(why) => write!(f, "{why}"),
            Error::Io { file, source } => {
                prefix(f, file)?;
                write!(f, "{source}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Error {
        Error::Io { file: None, source }
    }
}
