//! The jeprof views beyond `--text`, `--collapsed` and flame graphs, and the options that shape
//! every report: [`filters`] (`--ignore`, `--retain`, `--exclude`), [`base`] (`--base`,
//! `--drop_negative`, `--thread`), [`lines`] (`--lines`), [`callgrind`] (`--callgrind`), [`list`] (`--list`), [`dot`] (`--dot`, `--svg`), [`remote`] (`http://host:port/pprof/heap`).

pub mod base;
pub mod callgrind;
pub mod dot;
pub mod filters;
pub mod lines;
pub mod list;
pub mod remote;
