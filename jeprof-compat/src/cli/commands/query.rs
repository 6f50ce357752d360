//! `query`: SQL over fleet rows, printed as a table or CSV; in a build without the `sql` feature,
//! an error saying how to get it.

#[cfg(feature = "sql")]
use crate::cli::defs::QueryArgs;
#[cfg(not(feature = "sql"))]
use crate::cli::defs::QueryUnavailable;
#[cfg(feature = "sql")]
use crate::cli::output::{emit, emit_with};

#[cfg(feature = "sql")]
pub(crate) fn run(args: QueryArgs) -> anyhow::Result<()> {
    use jeprof_compat::{query, sql_views};
    if let Some(engine) = &args.print_sql {
        // Nothing is run: the first operand is a file too.
        let inputs: Vec<String> = args
            .sql
            .into_iter()
            .chain(args.files.iter().map(|f| f.display().to_string()))
            .collect();
        if inputs.is_empty() {
            anyhow::bail!("query --print-sql: name the export's Parquet files (paths or URLs)");
        }
        return emit(&sql_views::statements(
            sql_views::Engine::parse(engine)?,
            &inputs,
        ));
    }
    let sql = args.sql.unwrap_or_default();
    let files = query::parquet_files(&args.files)?;
    let batches = query::run(&sql, &files)?;
    if args.csv {
        emit_with(|out| query::write_csv(&batches, out))
    } else {
        emit(&query::format_table(&batches, args.raw))
    }
}

#[cfg(not(feature = "sql"))]
pub(crate) fn run(_: QueryUnavailable) -> anyhow::Result<()> {
    Err(jeprof_compat::Error::Query {
        file: None,
        reason: "query: this jeprof-compat was built without its SQL engine; build it with \
                 `cargo install --path jeprof-compat --features sql`, or run the same SQL in \
                 DuckDB over the exported files (README, \"Fleet data in SQL\")"
            .into(),
    }
    .into())
}
