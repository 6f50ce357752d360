//! The jeprof views beyond `--text`, `--collapsed` and flame graphs: [`base`] (`--base`,
//! `--drop_negative`, `--thread`), [`callgrind`] (`--callgrind`), [`list`] (`--list`), [`dot`]
//! (`--dot`, `--svg`), [`remote`] (`http://host:port/pprof/heap`). They sit above
//! [`crate::report`], whose rules they show. The options that shape every report, [`filters`]
//! (`--ignore`, `--retain`, `--exclude`) and [`lines`] (`--lines`), live in the report and are
//! re-exported here.

pub mod base;
pub mod callgrind;
pub mod dot;
pub mod list;
pub mod remote;

pub use crate::report::{filters, lines};
