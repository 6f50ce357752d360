//! From the command line's words to a [`Command`]: clap parses, after jeprof's single-dash long
//! options are given their second dash.

use std::ffi::OsString;

use clap::{CommandFactory, Parser};

use crate::cli::defs::{Cli, Command};

/// Parses the program's arguments (`args`, the program's name first) into the subcommand to run.
/// Errors are clap's, `--help` and `--version` included: clap prints them and says where.
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, clap::Error> {
    Cli::try_parse_from(jeprof_dashes(args.into_iter().collect())).map(|cli| cli.command)
}

/// jeprof (Perl's Getopt::Long) takes long options after one dash as well as two (`-text`,
/// `-show_bytes`, `-focus=x`); clap takes two. Rewrites `-name` and `-name=value` to two dashes
/// where `name` is a long option (or alias) of the subcommand named first, up to a `--`. A value
/// given as the next argument (`--focus -x`) is left alone, as are short options (`-o`) and
/// anything else.
fn jeprof_dashes(args: Vec<OsString>) -> Vec<OsString> {
    let command = Cli::command();
    let Some(sub) = args
        .get(1)
        .and_then(|a| a.to_str())
        .and_then(|name| command.find_subcommand(name))
    else {
        return args;
    };
    // Each long name, and whether it takes a value.
    let mut longs: Vec<(&str, bool)> = Vec::new();
    for arg in sub.get_arguments() {
        let takes_value = arg.get_action().takes_values();
        for name in arg
            .get_long()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default())
        {
            longs.push((name, takes_value));
        }
    }
    let mut out = Vec::with_capacity(args.len());
    let mut value_next = false;
    let mut options_done = false;
    for arg in args {
        let text = arg.to_str().unwrap_or("");
        let is_value = std::mem::take(&mut value_next);
        if is_value || options_done || !text.starts_with('-') || text.starts_with("--") {
            options_done |= !is_value && text == "--";
            if let Some(name) = text.strip_prefix("--") {
                value_next = !name.contains('=') && longs.contains(&(name, true));
            }
            out.push(arg);
            continue;
        }
        let name = text[1..].split('=').next().unwrap_or("");
        match longs.iter().find(|(long, _)| *long == name) {
            Some(&(_, takes_value)) if name.len() > 1 => {
                value_next = takes_value && !text.contains('=');
                out.push(OsString::from(format!("-{text}")));
            }
            _ => out.push(arg),
        }
    }
    out
}
