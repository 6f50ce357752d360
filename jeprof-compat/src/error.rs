//! The library's one error type.

use std::fmt;
use std::path::PathBuf;

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
    /// Fetching a profile from a process ([`crate::views::remote`]) failed: the connection, the
    /// status of a page, or what it answered.
    Fetch {
        /// The page.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A view that reads the program itself ([`crate::views::list`]) could not read it.
    Program {
        /// The program (`--binary`).
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// [`crate::binary::check_binary_file`]: `--binary` cannot be read (it does not exist, most
    /// often).
    BinaryUnreadable {
        /// The path given.
        binary: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// [`crate::binary::check_binary_file`]: `--binary` is not an executable or shared object.
    NotAProgram {
        /// The path given.
        binary: PathBuf,
    },
    /// [`crate::binary::check_binary_matches`]: a raw dump maps programs, none of them with the
    /// file name of `--binary`, so nothing would be looked up in it.
    BinaryMatchesNoMapping {
        /// The path given.
        binary: PathBuf,
        /// The dump.
        dump: PathBuf,
        /// The executable files the dump maps (shared libraries aside).
        mapped: Vec<String>,
    },
    /// [`crate::binary::check_binary_matches`]: the dump records a build id for the mapping
    /// `--binary` stands for, and `--binary` has another: it is another build, whose addresses
    /// would name the wrong functions.
    BinaryBuildIdMismatch {
        /// The path given.
        binary: PathBuf,
        /// Its build id.
        actual: String,
        /// The dump.
        dump: PathBuf,
        /// The mapped file `--binary` stands for.
        mapped: String,
        /// The build id the dump records for it.
        recorded: String,
    },
    /// [`crate::symbolize::check_debug_dirs`]: a `--debug-dir` that is not a directory that can be
    /// read.
    DebugDir {
        /// The directory given.
        dir: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// [`crate::binary::split_program`]: the first dump is a program, with no dump after it or
    /// beside `--binary`.
    ProgramAsDump {
        /// The program given where a dump was expected.
        program: PathBuf,
        /// Whether `--binary` was given too.
        with_binary: bool,
    },
    /// [`crate::merge::expand`]: a list of dumps (`merge --inputs-from`) or a directory of dumps
    /// cannot be read, or a line of the list is not a path.
    InputList {
        /// The list (`-` for standard input) or the directory.
        list: PathBuf,
        /// The 1-based line of the list at fault, when it is one line.
        line: Option<usize>,
        /// What went wrong.
        reason: String,
    },
    /// [`crate::leaks`]: the dumps do not make one process's series the test can read (too few in
    /// its window, several processes) or its options are out of range; or its chart failed.
    Series(String),
    /// A label given on the command line (`--label KEY=VALUE`) that cannot be one.
    Label {
        /// The label as given.
        label: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing an output file failed (after the dumps were read): nothing is left at `path`.
    Output {
        /// The output file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The `query` module (cargo feature `sql`): a file that is not fleet rows of this schema
    /// version, or the SQL engine's own error (bad SQL, an unreadable file).
    Query {
        /// The file at fault, where the error is about one.
        file: Option<PathBuf>,
        /// What went wrong (the engine's message for SQL errors).
        reason: String,
    },
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
            Error::Fetch { url, reason } => write!(f, "{url}: {reason}"),
            Error::Program { path, reason } => {
                write!(f, "{}: cannot read the program: {reason}", path.display())
            }
            Error::BinaryUnreadable { binary, source } => {
                write!(f, "--binary {}: {source}", binary.display())
            }
            Error::NotAProgram { binary } => write!(
                f,
                "--binary {}: not an executable or shared object (ELF, Mach-O or PE)",
                binary.display()
            ),
            Error::BinaryMatchesNoMapping {
                binary,
                dump,
                mapped,
            } => write!(
                f,
                "--binary {}: {} maps no file of that name (it maps {}); give the program that \
                 wrote the dump, under its own file name",
                binary.display(),
                dump.display(),
                mapped.join(", ")
            ),
            Error::BinaryBuildIdMismatch {
                binary,
                actual,
                dump,
                mapped,
                recorded,
            } => write!(
                f,
                "--binary {}: its build id {actual} is not the one {} records for {mapped} \
                 ({recorded}); give the program that wrote the dump, or its debug file through \
                 --debug-dir",
                binary.display(),
                dump.display()
            ),
            Error::DebugDir { dir, reason } => write!(
                f,
                "--debug-dir {}: {reason} (a directory holding .build-id/xx/rest.debug files)",
                dir.display()
            ),
            Error::ProgramAsDump {
                program,
                with_binary: false,
            } => write!(
                f,
                "{}: a program, not a heap dump; give the dumps after it (`PROGRAM DUMP...`, as \
                 jeprof takes them) or use --binary PROGRAM DUMP...",
                program.display()
            ),
            Error::ProgramAsDump {
                program,
                with_binary: true,
            } => write!(
                f,
                "{}: a program, not a heap dump, and --binary is given too; give one program",
                program.display()
            ),
            Error::InputList { list, line, reason } => {
                let list = if list.as_os_str() == "-" {
                    "standard input".into()
                } else {
                    list.display().to_string()
                };
                match line {
                    Some(line) => write!(f, "{list}:{line}: {reason}"),
                    None => write!(f, "{list}: {reason}"),
                }
            }
            Error::Series(reason) => write!(f, "leaks: {reason}"),
            Error::Label { label, reason } => write!(
                f,
                "--label {label:?}: {reason} (KEY is [A-Za-z0-9_.-]+, VALUE any text on one line)"
            ),
            Error::Output { path, reason } => {
                write!(f, "{}: writing failed: {reason}", path.display())
            }
            Error::Query {
                file: Some(file),
                reason,
            } => write!(f, "{}: {reason}", file.display()),
            Error::Query { file: None, reason } => write!(f, "{reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the dump error's text is this error's text, so its source is ours.
            Error::Dump(e) => std::error::Error::source(e),
            Error::Flamegraph(e) => Some(e),
            Error::BinaryUnreadable { source, .. } => Some(source),
            Error::NothingToDraw { .. }
            | Error::Program { .. }
            | Error::Fetch { .. }
            | Error::NotAProgram { .. }
            | Error::BinaryMatchesNoMapping { .. }
            | Error::DebugDir { .. }
            | Error::BinaryBuildIdMismatch { .. }
            | Error::ProgramAsDump { .. }
            | Error::InputList { .. }
            | Error::Series(_)
            | Error::Label { .. }
            | Error::Output { .. }
            | Error::Query { .. } => None,
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
