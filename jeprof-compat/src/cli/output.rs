//! What the subcommands print and write: stdout, where a reader that goes away (`| head`) ends the
//! program successfully, as ripgrep does; warnings on stderr; output files written atomically; and
//! a progress bar on stderr when it is a terminal.

use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use jeprof_dumpfmt::output::AtomicFile;

/// Writes to stdout; a closed pipe ends the program successfully.
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    emit_with(|out| out.write_all(text.as_bytes()))
}

/// Writes to stdout through `write`, buffered, as it goes (a report of a million functions is
/// never all in memory as text); a closed pipe ends the program successfully.
pub(crate) fn emit_with(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => Ok(other.context("writing to stdout")?),
    }
}

/// Writes an output file atomically (an exclusive 0600 temporary file beside it, renamed over it:
/// [`jeprof_dumpfmt::output::AtomicFile`]); on any error nothing is left at `path` but what was
/// there before.
pub(crate) fn write_output(
    path: &Path,
    body: impl FnOnce(&mut AtomicFile) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    jeprof_dumpfmt::output::write_atomically(path, |file| {
        body(file).with_context(|| format!("{}: write failed", path.display()))
    })
}

/// One line on stderr that does not stop the run.
pub(crate) fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "jeprof-compat: warning: {message}");
}

/// Perl's `%d` (which jeprof's integer figures go through) prints figures of 2^63 and more as
/// negative numbers or -1; we print what jeprof prints, and say so.
pub(crate) const PERL_OVERFLOW: &str =
    "some figures are 2^63 or more, which jeprof's integer printing \
     (Perl's %d) shows as negative numbers or -1, as here; the MB view (without --show_bytes) \
     prints them";

/// A count of the dumps done, drawn on stderr when it is a terminal (and nothing otherwise).
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar of `len` dumps.
    pub(crate) fn of(len: usize) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        Self(Some(bar(len as u64)))
    }

    /// A bar of the dumps `count` finds, or a counter without a total where it finds `None`.
    /// `count` runs only when there is a bar to draw: counting reads each list and directory once
    /// more, which is only worth it for the bar.
    pub(crate) fn counted(
        count: impl FnOnce() -> anyhow::Result<Option<u64>>,
    ) -> anyhow::Result<Self> {
        if !std::io::stderr().is_terminal() {
            return Ok(Self(None));
        }
        Ok(Self(Some(match count()? {
            Some(total) => bar(total),
            None => styled(
                ProgressBar::no_length(),
                "{spinner} {pos} dumps, {per_sec}, {elapsed}",
            ),
        })))
    }

    /// One more dump done.
    pub(crate) fn tick(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    /// Clears the bar from the terminal.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

fn bar(total: u64) -> ProgressBar {
    styled(
        ProgressBar::new(total),
        "{bar:40} {pos}/{len} dumps, {per_sec}, eta {eta}",
    )
}

fn styled(bar: ProgressBar, template: &str) -> ProgressBar {
    bar.set_style(ProgressStyle::with_template(template).expect("static template"));
    bar
}
