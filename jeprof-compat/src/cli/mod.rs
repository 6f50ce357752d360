//! The command line, in ripgrep's shape. Bottom to top, each module using only those before it in
//! this list (and the libraries):
//!
//! - [`help`]: the examples and explanations printed after each command's options;
//! - [`defs`]: the flags, as clap derives them (what ripgrep splits into `defs.rs` and
//!   `lowargs.rs`: clap's derive makes the declaration and the parsed value one field);
//! - [`parse`]: the command line's words to a [`defs::Command`], jeprof's single-dash long options
//!   included;
//! - [`output`]: stdout (a closed pipe is success), warnings, atomic output files, progress;
//! - [`options`]: the parsed flags made into the library's options (ripgrep's `hiargs.rs`);
//! - [`views`]: `report`'s views of whole dumps;
//! - [`commands`]: one runner per subcommand.
//!
//! `main.rs` parses, hands the subcommand to its runner and turns the result into an exit status.

pub(crate) mod commands;
pub(crate) mod defs;
pub(crate) mod help;
pub(crate) mod options;
pub(crate) mod output;
pub(crate) mod parse;
pub(crate) mod whole_dumps;
