//! `jeprof-compat`: jeprof's heap reports without Perl, fleet merges, pprof output and leak diffs
//! for jemalloc `heap_v2` dumps. A thin command line over the `jeprof_compat` library: [`cli`]
//! declares the flags and runs each subcommand; this file parses, dispatches and sets the exit
//! status (0 on success, also when the reader of stdout goes away; 2 on bad input or usage).

use std::io::Write;
use std::process::ExitCode;

use cli::commands;
use cli::defs::Command;

mod cli;

/// jemalloc: the merge's many short-lived names and frame lists cost about half as much as with the
/// system allocator.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Each subcommand to its runner.
fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Report(args) => commands::report::run(args),
        Command::Merge(args) => commands::merge::run(args),
        Command::Pprof(args) => commands::pprof::run(args),
        Command::Otlp(args) => commands::otlp::run(args),
        Command::Diff(args) => commands::diff::run(args),
        Command::Leaks(args) => commands::leaks::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Symbolize(args) => commands::symbolize::run(args),
        Command::Query(args) => commands::query::run(args),
    }
}

fn main() -> ExitCode {
    let command = match cli::parse::parse(std::env::args_os()) {
        Ok(command) => command,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            // --help and --version go to stdout; a closed pipe there is fine.
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the file, the line and what was wrong come from the reader's error.
            // Each cause once: the reader's errors already include their source's text.
            let mut message = String::new();
            for cause in e.chain() {
                let text = cause.to_string();
                if !message.contains(&text) {
                    if !message.is_empty() {
                        message.push_str(": ");
                    }
                    message.push_str(&text);
                }
            }
            let message = message.replace('\n', " ");
            let _ = writeln!(std::io::stderr(), "jeprof-compat: {message}");
            ExitCode::from(2)
        }
    }
}
