//! The jeprof views beyond `--text`, `--collapsed` and flame graphs, and the options that shape
//! every report: [`filters`] (`--ignore`, `--retain`, `--exclude`), [`base`] (`--base`,
//! `--drop_negative`, `--thread`).

pub mod base;
pub mod filters;
