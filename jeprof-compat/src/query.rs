//! SQL over fleet rows: what `jeprof-compat query` runs (`docs/design.md` §14).
//!
//! The rows are the Parquet files `jeprof-compat export` writes ([`crate::export`], schema v1 of
//! `docs/design.md` §13): one row per (dump, stack), each
//! already unbiased per sample, with its variances. Because unbiasing happened before any adding,
//! a plain `SUM` over any grouping is the unbiased estimate of that group, and `SUM` of the
//! variances is its variance (the samples are independent). An engine given raw sampled counts
//! instead would have to scale sums of mixed sizes by their average size, which is wrong
//! (§2); these rows make every engine's `SUM` right.
//!
//! [`run`] registers the files as table `rows` in an in-process [DataFusion] session, defines the
//! views of [`VIEWS`] (`by_function`, `by_leaf`, `by_label`, `over_time`, each with 95% intervals),
//! and runs one SQL statement. The views' SQL is in `jeprof-compat/sql/*.sql`, written so that
//! DuckDB runs it unchanged over the same files; [`crate::sql_views`] spells it for Spark and
//! ClickHouse.
//!
//! [DataFusion]: https://datafusion.apache.org/
//!
//! ```no_run
//! use std::path::PathBuf;
//! use jeprof_compat::query;
//!
//! let files = query::parquet_files(&[PathBuf::from("fleet/")]).unwrap();
//! let batches = query::run(
//!     "SELECT function, inuse_bytes, inuse_bytes_lo, inuse_bytes_hi FROM by_function \
//!      ORDER BY inuse_bytes DESC LIMIT 10",
//!     &files,
//! )
//! .unwrap();
//! print!("{}", query::format_table(&batches, false));
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int32Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::prelude::SessionContext;

use crate::error::Error;
use crate::export::parquet::FIGURE_COLUMNS;

/// The version of the rows' schema this module reads (the `schema_version` column): the one
/// [`crate::export`] writes.
pub use crate::export::parquet::SCHEMA_VERSION;

/// The named views, in the spelling DataFusion runs (the module that spells them for each engine
/// says what each holds).
pub use crate::sql_views::VIEWS;

/// The columns [`VIEWS`] read besides the estimates ([`FIGURE_COLUMNS`]), which every file must
/// have.
const KEY_COLUMNS: [&str; 8] = [
    "schema_version",
    "dump",
    "pid",
    "time",
    "labels",
    "leaf",
    "user_frame",
    "sample_period",
];

fn query_error(file: Option<&Path>, reason: impl Into<String>) -> Error {
    Error::Query {
        file: file.map(Path::to_path_buf),
        reason: reason.into(),
    }
}

/// The Parquet files that `inputs` name, in a stable order: a file as given, a directory as every
/// `*.parquet` file under it (recursively, so Hive-style `key=value/` partitions work), and a
/// pattern with `*`, `?` or `[` that names no file as what it matches (for shells that did not
/// expand it). Fails on an input that names nothing, and when no file results.
pub fn parquet_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found = BTreeSet::new();
            collect_parquet(input, &mut found)?;
            if found.is_empty() {
                return Err(query_error(
                    Some(input),
                    "no *.parquet file in this directory",
                ));
            }
            files.extend(found);
        } else if input.exists() {
            files.push(input.clone());
        } else {
            let pattern = input.to_string_lossy();
            let matched: BTreeSet<PathBuf> = if pattern.contains(['*', '?', '[']) {
                glob::glob(&pattern)
                    .map_err(|e| query_error(Some(input), format!("bad pattern: {e}")))?
                    .filter_map(Result::ok)
                    .filter(|p| p.is_file())
                    .collect()
            } else {
                BTreeSet::new()
            };
            if matched.is_empty() {
                return Err(query_error(Some(input), "no such file or directory"));
            }
            files.extend(matched);
        }
    }
    if files.is_empty() {
        return Err(query_error(None, "no Parquet files given"));
    }
    Ok(files)
}

fn collect_parquet(dir: &Path, found: &mut BTreeSet<PathBuf>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| query_error(Some(dir), e.to_string()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| query_error(Some(dir), e.to_string()))?
            .path();
        if path.is_dir() {
            collect_parquet(&path, found)?;
        } else if path.extension().is_some_and(|e| e == "parquet") {
            found.insert(path);
        }
    }
    Ok(())
}

/// Checks that `path` is rows this module reads: a Parquet file, with the columns the views use,
/// and `schema_version` [`SCHEMA_VERSION`] on every row. Reads the footer and that one column.
pub fn check_rows_file(path: &Path) -> Result<(), Error> {
    let file = std::fs::File::open(path).map_err(|e| query_error(Some(path), e.to_string()))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        query_error(
            Some(path),
            format!("not a Parquet file of fleet rows (from `jeprof-compat export`): {e}"),
        )
    })?;
    let schema = builder.schema().clone();
    let missing: Vec<&str> = KEY_COLUMNS
        .iter()
        .chain(&FIGURE_COLUMNS)
        .copied()
        .filter(|c| schema.field_with_name(c).is_err())
        .collect();
    if !missing.is_empty() {
        return Err(query_error(
            Some(path),
            format!(
                "not fleet rows from `jeprof-compat export`: no column {}",
                missing.join(", ")
            ),
        ));
    }
    if schema
        .field_with_name("schema_version")
        .ok()
        .map(|f| f.data_type())
        != Some(&DataType::Int32)
    {
        return Err(query_error(
            Some(path),
            "`schema_version` is not an Int32 column",
        ));
    }
    let mask = ProjectionMask::columns(builder.parquet_schema(), ["schema_version"]);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|e| query_error(Some(path), e.to_string()))?;
    for batch in reader {
        let batch = batch.map_err(|e| query_error(Some(path), e.to_string()))?;
        let versions: &Int32Array = batch.column(0).as_primitive();
        if let Some(other) = versions.iter().find(|v| *v != Some(SCHEMA_VERSION)) {
            return Err(query_error(
                Some(path),
                format!(
                    "rows of schema version {}, this jeprof-compat reads version \
                     {SCHEMA_VERSION}: export the dumps again with this version",
                    other.map_or("null".to_string(), |v| v.to_string())
                ),
            ));
        }
    }
    Ok(())
}

/// Runs one SQL statement over `files` (checked with [`check_rows_file`]) registered as table
/// `rows`, with the [`VIEWS`] defined, and returns its result: [`Session::new`] then
/// [`Session::sql`].
pub fn run(sql: &str, files: &[PathBuf]) -> Result<Vec<RecordBatch>, Error> {
    Session::new(files)?.sql(sql)
}

/// An in-process SQL session over fleet rows: table `rows`, the [`VIEWS`], and any other Parquet
/// tables registered beside them (an inventory of hosts to join with, say).
pub struct Session {
    runtime: tokio::runtime::Runtime,
    context: SessionContext,
}

impl Session {
    /// Checks every file with [`check_rows_file`], registers them as table `rows` and defines
    /// the [`VIEWS`].
    pub fn new(files: &[PathBuf]) -> Result<Session, Error> {
        for file in files {
            check_rows_file(file)?;
        }
        // DataFusion's executor is async; one multi-threaded runtime scans files in parallel.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .build()
            .map_err(|e| query_error(None, format!("cannot start the query runtime: {e}")))?;
        let session = Session {
            runtime,
            context: SessionContext::new(),
        };
        session.register_parquet("rows", files)?;
        for (name, view) in VIEWS {
            session
                .runtime
                .block_on(session.context.sql(view))
                .map_err(|e| query_error(None, format!("defining view {name}: {e}")))?;
        }
        Ok(session)
    }

    /// Registers `files` (any Parquet files of one schema, not checked as rows) as table `name`.
    pub fn register_parquet(&self, name: &str, files: &[PathBuf]) -> Result<(), Error> {
        let mut urls = Vec::with_capacity(files.len());
        for file in files {
            let absolute =
                std::path::absolute(file).map_err(|e| query_error(Some(file), e.to_string()))?;
            let url = ListingTableUrl::parse(absolute.to_string_lossy())
                .map_err(|e| query_error(Some(file), e.to_string()))?;
            urls.push(url);
        }
        // Every file is listed explicitly, so no extension filter: `rows.pq` is read too.
        let options =
            ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension("");
        let state = self.context.state();
        let config = self
            .runtime
            .block_on(
                ListingTableConfig::new_with_multi_paths(urls)
                    .with_listing_options(options)
                    .infer_schema(&state),
            )
            .map_err(|e| query_error(files.first().map(PathBuf::as_path), e.to_string()))?;
        let table = ListingTable::try_new(config).map_err(|e| query_error(None, e.to_string()))?;
        self.context
            .register_table(name, Arc::new(table))
            .map_err(|e| query_error(None, e.to_string()))?;
        Ok(())
    }

    /// Runs one SQL statement and collects its result: at least one batch, empty when no row
    /// came out, so that the columns are known. Errors carry the engine's message.
    pub fn sql(&self, sql: &str) -> Result<Vec<RecordBatch>, Error> {
        self.runtime
            .block_on(async {
                let frame = self.context.sql(sql).await?;
                let schema = Arc::new(frame.schema().as_arrow().clone());
                let mut batches = frame.collect().await?;
                if batches.is_empty() {
                    batches.push(RecordBatch::new_empty(schema));
                }
                Ok(batches)
            })
            .map_err(|e: datafusion::error::DataFusionError| query_error(None, format!("SQL: {e}")))
    }
}

/// Whether a result column holds bytes, which the table prints in MB as jeprof does (not a
/// variance, which is in bytes²).
fn is_bytes_column(name: &str) -> bool {
    name.contains("bytes") && !name.ends_with("_var")
}

/// The result as an aligned table: a header of column names, then one line per row, numbers
/// right-aligned. Float columns whose name contains `bytes` (variances aside) print as jeprof's
/// reports print bytes (MB with one decimal), or as whole bytes with `raw`; other float columns as
/// whole numbers (object counts, variances). Nulls print as empty cells.
pub fn format_table(batches: &[RecordBatch], raw: bool) -> String {
    let Some(first) = batches.first() else {
        return String::new();
    };
    let schema = first.schema();
    let fields = schema.fields();
    let mut cells: Vec<Vec<String>> = vec![fields
        .iter()
        .map(|f| {
            if !raw && f.data_type() == &DataType::Float64 && is_bytes_column(f.name()) {
                format!("{} (MB)", f.name())
            } else {
                f.name().clone()
            }
        })
        .collect()];
    let numeric: Vec<bool> = fields.iter().map(|f| f.data_type().is_numeric()).collect();
    let options = FormatOptions::default();
    for batch in batches {
        let formatters: Vec<Option<ArrayFormatter>> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).ok())
            .collect();
        for row in 0..batch.num_rows() {
            let line = (0..batch.num_columns())
                .map(|col| {
                    let column = batch.column(col);
                    if column.is_null(row) {
                        return String::new();
                    }
                    if column.data_type() == &DataType::Float64 {
                        let x = column.as_primitive::<Float64Type>().value(row);
                        return if !raw && is_bytes_column(fields[col].name()) {
                            format!("{:.1}", x / 1_048_576.0)
                        } else {
                            format!("{x:.0}")
                        };
                    }
                    formatters[col]
                        .as_ref()
                        .map_or_else(String::new, |f| f.value(row).to_string())
                })
                .collect();
            cells.push(line);
        }
    }
    let widths: Vec<usize> = (0..fields.len())
        .map(|col| {
            cells
                .iter()
                .map(|r| r[col].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in &cells {
        let mut text = String::new();
        for (col, cell) in line.iter().enumerate() {
            if col > 0 {
                text.push_str("  ");
            }
            let width = widths[col];
            // The last column left-aligned is printed without padding, as jeprof's function column.
            if numeric[col] {
                let _ = write!(text, "{cell:>width$}");
            } else if col + 1 == line.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// Writes the result as CSV with a header line, every value as the engine has it (floats in full).
pub fn write_csv(batches: &[RecordBatch], out: impl std::io::Write) -> std::io::Result<()> {
    let mut writer = datafusion::arrow::csv::WriterBuilder::new()
        .with_header(true)
        .build(out);
    for batch in batches {
        writer.write(batch).map_err(|e| match e {
            ArrowError::IoError(_, io) => io,
            other => std::io::Error::other(other),
        })?;
    }
    Ok(())
}
