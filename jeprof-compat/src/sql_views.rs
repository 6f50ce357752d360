//! The SQL views over fleet rows (`jeprof-compat/sql/*.sql`, `docs/design.md` §14), one source
//! per view, and each engine's spelling of it.
//!
//! The sources are written in the SQL that DataFusion (`jeprof-compat query`) and DuckDB run as
//! they are. Spark and ClickHouse differ in two places only, and [`view`] rewrites exactly those,
//! so that no engine has a copy of a view that could drift from the others:
//!
//! - A row under each of its dump's labels: the sources write the pair as
//!   `UNNEST(map_keys(labels)) AS label, UNNEST(map_values(labels)) AS value` (DataFusion and
//!   DuckDB unnest the two lists side by side). Spark spells it `explode(labels) AS (label,
//!   value)`; ClickHouse has no `map_keys` (it is `mapKeys`), and turns each `UNNEST` into an
//!   `arrayJoin` of its own, which would pair every key with every value, so there the pair is one
//!   `arrayJoin` over the zipped keys and values.
//! - ClickHouse resolves an alias before a column of the same name, so in `SUM(inuse_bytes) AS
//!   inuse_bytes, ... SQRT(SUM(inuse_bytes_var))` the next `SUM(inuse_bytes)` would sum the sum
//!   (ILLEGAL_AGGREGATION). Its setting `prefer_column_name_to_alias = 1` resolves the column
//!   first, as the other engines do; each ClickHouse view carries it in its own `SETTINGS`
//!   clause, so that a session needs no setting to query the views.
//! - Spark's `CREATE VIEW` needs `OR REPLACE TEMPORARY` over a temporary view of the files.
//!
//! [`statements`] gives what a user runs in an engine: `rows` over the export's Parquet files
//! (in ClickHouse through the `file()` or `s3()` table function), then every view that engine
//! runs. Spark runs all but `leak_trend` (it has no `EXTRACT(EPOCH ...)`).
//! `jeprof-compat/sql/clickhouse/` and `jeprof-compat/sql/spark/` hold the generated views, for
//! the Spark job and for ClickHouse users without this tool; a test keeps them equal to [`view`]'s.

use crate::error::Error;

/// The named views, as `(name, CREATE VIEW statement)` in the spelling DataFusion and DuckDB run.
///
/// Each groups the rows one way and gives, for `inuse_bytes`, `inuse_objects`, `alloc_bytes` and
/// `alloc_objects`, the sum, the sum of its variances as `<column>_var` (so that a view's results
/// can be added up again), and its 95% interval as `<column>_lo` and `<column>_hi`
/// (`SUM ± 1.96·√SUM(<column>_var)`, the lower end clamped at 0), plus `dumps`, how many dumps
/// contributed:
/// - `by_function` (`function`): flat, charged to each row's `user_frame` (as jeprof's reports
///   charge flat);
/// - `by_leaf` (`leaf`): per innermost frame;
/// - `by_label` (`label`, `value`): per label pair of the dumps (a row counts under each of its
///   dump's labels);
/// - `over_time` (`hour`): per hour of the dumps' time, UTC;
/// - `leak_trend` (`label`, `value`, `function`): [`crate::leaks`]' test over hours for each label
///   pair of a fleet (a process's last dump of each hour, the processes' figures added), with
///   growth per hour, live bytes, the p-value and `suspect` (Benjamini–Hochberg at 5% per label
///   pair); its own columns, not the four figures above.
pub const VIEWS: [(&str, &str); 5] = [
    ("by_function", include_str!("../sql/by_function.sql")),
    ("by_leaf", include_str!("../sql/by_leaf.sql")),
    ("by_label", include_str!("../sql/by_label.sql")),
    ("over_time", include_str!("../sql/over_time.sql")),
    ("leak_trend", include_str!("../sql/leak_trend.sql")),
];

/// An SQL engine the views are spelled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// Apache DataFusion, `jeprof-compat query`'s engine: the sources as they are.
    DataFusion,
    /// DuckDB: the sources as they are.
    DuckDb,
    /// Apache Spark SQL (`spark/fleet_aggregate.py`).
    Spark,
    /// ClickHouse (a server, or chDB in-process).
    ClickHouse,
}

impl Engine {
    /// Every engine, in the order of [`Engine::name`]'s list.
    pub const ALL: [Engine; 4] = [
        Engine::DataFusion,
        Engine::DuckDb,
        Engine::Spark,
        Engine::ClickHouse,
    ];

    /// The engine's name as the CLI takes it: `datafusion`, `duckdb`, `spark`, `clickhouse`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::DataFusion => "datafusion",
            Engine::DuckDb => "duckdb",
            Engine::Spark => "spark",
            Engine::ClickHouse => "clickhouse",
        }
    }

    /// The engine named `name` (as [`Engine::name`] spells it, any case).
    pub fn parse(name: &str) -> Result<Engine, Error> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::Query {
                file: None,
                reason: format!(
                    "no SQL engine {name:?}: the views are spelled for {}",
                    Engine::ALL.map(Engine::name).join(", ")
                ),
            })
    }

    /// Whether the engine runs view `name` (Spark has no `EXTRACT(EPOCH ...)`, which
    /// `leak_trend` uses).
    pub fn runs(self, name: &str) -> bool {
        !(self == Engine::Spark && name == "leak_trend")
    }
}

/// The sources' spelling of a row under each of its labels, split at the whitespace between the
/// two items (which differs by indentation).
const LABEL_PAIR: (&str, &str) = (
    "UNNEST(map_keys(labels)) AS label,",
    "UNNEST(map_values(labels)) AS value",
);

/// `text` with every [`LABEL_PAIR`] (its two items and the whitespace between) replaced by
/// `spelling`.
fn replace_label_pairs(text: &str, spelling: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(LABEL_PAIR.0) {
        let after = &rest[start + LABEL_PAIR.0.len()..];
        let trimmed = after.trim_start();
        let Some(tail) = trimmed.strip_prefix(LABEL_PAIR.1) else {
            // A lone key list is not a pair: left as it is (no source has one).
            out.push_str(&rest[..start + LABEL_PAIR.0.len()]);
            rest = after;
            continue;
        };
        out.push_str(&rest[..start]);
        out.push_str(spelling);
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// View `source` (a `CREATE VIEW <name> AS ...;` statement of [`VIEWS`]) in `engine`'s spelling.
pub fn view(engine: Engine, source: &str) -> String {
    match engine {
        Engine::DataFusion | Engine::DuckDb => source.to_string(),
        Engine::Spark => replace_label_pairs(source, "explode(labels) AS (label, value)").replacen(
            "CREATE VIEW ",
            "CREATE OR REPLACE TEMPORARY VIEW ",
            1,
        ),
        Engine::ClickHouse => {
            let text = replace_label_pairs(
                source,
                "tupleElement(arrayJoin(arrayZip(mapKeys(labels), mapValues(labels))) AS \
                 label_pair, 1) AS label,\n        tupleElement(label_pair, 2) AS value",
            );
            let body = text.trim_end().trim_end_matches(';');
            format!("{body}\nSETTINGS prefer_column_name_to_alias = 1;\n")
        }
    }
}

/// Single-quoted SQL string literal of `text` (quotes doubled).
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Whether `input` is a URL (`s3://`, `https://`, `hdfs://`...) rather than a local path.
fn is_url(input: &str) -> bool {
    input.contains("://")
}

/// The statement that makes table `rows` of the export's Parquet files in `engine`: `inputs` are
/// files, directories (every `*.parquet` below them) or glob patterns, local or URLs.
pub fn rows_statement(engine: Engine, inputs: &[String]) -> String {
    // A directory as the recursive pattern of its Parquet files, in the engine's glob syntax.
    let pattern = |input: &str, recursive: &str| -> String {
        let local_dir = !is_url(input) && std::path::Path::new(input).is_dir();
        if local_dir || input.ends_with('/') {
            format!("{}/{recursive}", input.trim_end_matches('/'))
        } else {
            input.to_string()
        }
    };
    match engine {
        Engine::ClickHouse => {
            let selects: Vec<String> = inputs
                .iter()
                .map(|i| {
                    let function = if is_url(i) { "s3" } else { "file" };
                    format!(
                        "SELECT * FROM {function}({}, Parquet)",
                        quoted(&pattern(i, "**.parquet"))
                    )
                })
                .collect();
            format!("CREATE VIEW rows AS {};\n", selects.join(" UNION ALL "))
        }
        Engine::DuckDb => {
            let list: Vec<String> = inputs
                .iter()
                .map(|i| quoted(&pattern(i, "**/*.parquet")))
                .collect();
            format!(
                "SET TimeZone = 'UTC';\nCREATE VIEW rows AS SELECT * FROM read_parquet([{}]);\n",
                list.join(", ")
            )
        }
        Engine::Spark => {
            let selects: Vec<String> = inputs
                .iter()
                .map(|i| format!("SELECT * FROM parquet.`{}`", i.replace('`', "``")))
                .collect();
            format!(
                "SET spark.sql.session.timeZone = UTC;\nCREATE OR REPLACE TEMPORARY VIEW rows AS {};\n",
                selects.join(" UNION ALL ")
            )
        }
        Engine::DataFusion => {
            let table = |n: usize| {
                if inputs.len() == 1 {
                    "rows".to_string()
                } else {
                    format!("rows_{n}")
                }
            };
            let mut out: String = inputs
                .iter()
                .enumerate()
                .map(|(n, i)| {
                    format!(
                        "CREATE EXTERNAL TABLE {} STORED AS PARQUET LOCATION {};\n",
                        table(n),
                        quoted(i)
                    )
                })
                .collect();
            if inputs.len() > 1 {
                let selects: Vec<String> = (0..inputs.len())
                    .map(|n| format!("SELECT * FROM {}", table(n)))
                    .collect();
                out.push_str(&format!(
                    "CREATE VIEW rows AS {};\n",
                    selects.join(" UNION ALL ")
                ));
            }
            out
        }
    }
}

/// Everything a user runs in `engine` to query the export's files `inputs`: `rows`, then each
/// view the engine runs, in its spelling, separated by blank lines.
pub fn statements(engine: Engine, inputs: &[String]) -> String {
    let mut out = format!(
        "-- jeprof-compat's views (jeprof-compat/sql, docs/design.md §14), spelled for {}.\n",
        engine.name()
    );
    out.push_str(&rows_statement(engine, inputs));
    for (name, source) in VIEWS {
        if engine.runs(name) {
            out.push('\n');
            out.push_str(&view(engine, source));
        }
    }
    out
}

/// The generated file of view `name` in `engine`'s spelling, as committed under
/// `jeprof-compat/sql/<engine>/<name>.sql`: a line saying where it comes from, then [`view`].
pub fn generated_file(engine: Engine, name: &str, source: &str) -> String {
    format!(
        "-- Generated from ../{name}.sql for {} by jeprof-compat's sql_views module; do not edit\n\
         -- (SQL_VIEWS_BLESS=1 cargo test -p jeprof-compat --lib sql_views writes it again).\n{}",
        engine.name(),
        view(engine, source)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed spellings (`sql/spark/`, `sql/clickhouse/`) are what [`view`] makes of the
    /// sources; `SQL_VIEWS_BLESS=1` writes them.
    #[test]
    fn committed_engine_spellings_are_generated_from_the_sources() {
        let bless = std::env::var_os("SQL_VIEWS_BLESS").is_some();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        for engine in [Engine::Spark, Engine::ClickHouse] {
            for (name, source) in VIEWS.iter().filter(|(n, _)| engine.runs(n)) {
                let path = dir.join(engine.name()).join(format!("{name}.sql"));
                let want = generated_file(engine, name, source);
                if bless {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, &want).unwrap();
                }
                let got = std::fs::read_to_string(&path).unwrap_or_default();
                assert!(
                    got == want,
                    "{} differs from its source's spelling: SQL_VIEWS_BLESS=1 cargo test -p \
                     jeprof-compat --lib sql_views",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn clickhouse_and_spark_spell_each_label_pair_once_and_keep_no_source_spelling() {
        for (name, source) in VIEWS {
            let pairs = source.matches(LABEL_PAIR.0).count();
            assert_eq!(
                pairs,
                source.matches(LABEL_PAIR.1).count(),
                "{name}: keys and values unnested apart"
            );
            let clickhouse = view(Engine::ClickHouse, source);
            assert!(!clickhouse.contains("map_keys") && !clickhouse.contains("UNNEST"));
            assert_eq!(clickhouse.matches("arrayJoin(").count(), pairs, "{name}");
            assert!(clickhouse.ends_with("SETTINGS prefer_column_name_to_alias = 1;\n"));
            if Engine::Spark.runs(name) {
                let spark = view(Engine::Spark, source);
                assert!(!spark.contains("UNNEST"), "{name}: {spark}");
                assert_eq!(spark.matches("explode(labels)").count(), pairs, "{name}");
                assert!(spark.contains(&format!("CREATE OR REPLACE TEMPORARY VIEW {name} AS")));
            }
            assert_eq!(view(Engine::DuckDb, source), source);
        }
    }

    #[test]
    fn clickhouse_reads_local_paths_with_file_and_urls_with_s3() {
        let sql = rows_statement(
            Engine::ClickHouse,
            &[
                "fleet/day-1.parquet".into(),
                "s3://bucket/fleet/".into(),
                "it's.parquet".into(),
            ],
        );
        assert_eq!(
            sql,
            "CREATE VIEW rows AS SELECT * FROM file('fleet/day-1.parquet', Parquet) \
             UNION ALL SELECT * FROM s3('s3://bucket/fleet/**.parquet', Parquet) \
             UNION ALL SELECT * FROM file('it''s.parquet', Parquet);\n"
        );
    }

    #[test]
    fn an_unknown_engine_is_refused_naming_the_known_ones() {
        assert_eq!(Engine::parse("ClickHouse").unwrap(), Engine::ClickHouse);
        let e = Engine::parse("mysql").unwrap_err().to_string();
        assert!(e.contains("\"mysql\"") && e.contains("clickhouse"), "{e}");
    }
}
