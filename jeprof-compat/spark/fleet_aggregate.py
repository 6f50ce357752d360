#!/usr/bin/env python3
"""Fleet heap aggregates in Apache Spark, over the rows `jeprof-compat export` writes.

When one machine is not enough for `jeprof-compat query` (docs/design.md §14), the same Parquet
files go to Spark. Every row is already unbiased per sample, so a plain SUM over any grouping is
the unbiased estimate, and the SUM of a column's `_var` is its variance: the job computes, per
function (flat, by `user_frame`), per leaf, per label and per hour, the four figures with their 95%
intervals (SUM ± 1.96·sqrt(SUM(var)), the lower end clamped at 0), and the fleet totals.

The views by_function, by_leaf, by_label and over_time are read from `../sql/spark/*.sql`: the
files `jeprof-compat query` and DuckDB run (`../sql/*.sql`) in Spark's spelling, generated from them
by jeprof-compat (src/sql_views.rs: `explode(labels)` for the label pairs, temporary views), so that
no view has a copy here that could drift.

Usage:
    spark-submit fleet_aggregate.py [--format csv|parquet] OUTPUT_DIR INPUT...
    python3 fleet_aggregate.py --master 'local[2]' OUTPUT_DIR fleet/   # pip's pyspark, no cluster

INPUT: Parquet files, directories or globs (anything `spark.read.parquet` takes, HDFS and S3 paths
included). Writes OUTPUT_DIR/<aggregate>/ for by_function, by_leaf, by_label, over_time and
totals, each one CSV file with a header (or Parquet), replacing what was there.
"""

import argparse
import os
import sys

SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sql")
SCHEMA_VERSION = 1
FIGURES = ["inuse_bytes", "inuse_objects", "alloc_bytes", "alloc_objects"]
Z_95 = "1.959963984540054"


def interval_columns():
    """The SELECT list of sums and 95% intervals, as in ../sql/*.sql (for the totals)."""
    cols = []
    for f in FIGURES:
        cols.append(f"SUM({f}) AS {f}")
        cols.append(f"SUM({f}_var) AS {f}_var")
        cols.append(f"GREATEST(SUM({f}) - {Z_95} * SQRT(SUM({f}_var)), 0) AS {f}_lo")
        cols.append(f"SUM({f}) + {Z_95} * SQRT(SUM({f}_var)) AS {f}_hi")
    cols.append("COUNT(DISTINCT dump) AS dumps")
    return ",\n    ".join(cols)


TOTALS = f"SELECT {interval_columns()} FROM rows"


def shared_view(name):
    """../sql/spark/<name>.sql, the view's statement in Spark's spelling (without its `;`)."""
    with open(os.path.join(SQL_DIR, "spark", f"{name}.sql"), encoding="utf-8") as f:
        return f.read().rstrip().rstrip(";")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="directory for the aggregates")
    parser.add_argument("inputs", nargs="+", help="Parquet files, directories or globs")
    parser.add_argument("--format", choices=["csv", "parquet"], default="csv")
    parser.add_argument("--master", help="Spark master when run without spark-submit, e.g. local[2]")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("jeprof fleet aggregate")
    if args.master:
        builder = builder.master(args.master)
    # Hours in UTC whatever the machine's zone; few partitions, as the aggregates are small.
    spark = (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        rows = spark.read.parquet(*args.inputs)
        missing = [c for c in ["schema_version", "dump", "labels", "user_frame", "leaf", "time"]
                   + FIGURES + [f + "_var" for f in FIGURES] if c not in rows.columns]
        if missing:
            sys.exit(f"fleet_aggregate: {args.inputs}: not rows from `jeprof-compat export`: no column {', '.join(missing)}")
        versions = [r[0] for r in rows.select("schema_version").distinct().collect()]
        if versions != [SCHEMA_VERSION]:
            sys.exit(f"fleet_aggregate: rows of schema version {versions}, this job reads version {SCHEMA_VERSION}")
        rows.createOrReplaceTempView("rows")
        for name in ["by_function", "by_leaf", "by_label", "over_time"]:
            spark.sql(shared_view(name))
        for name in ["by_function", "by_leaf", "by_label", "over_time", "totals"]:
            frame = spark.sql(TOTALS if name == "totals" else f"SELECT * FROM {name}")
            writer = frame.coalesce(1).write.mode("overwrite")
            path = os.path.join(args.output, name)
            if args.format == "csv":
                writer.option("header", "true").csv(path)
            else:
                writer.parquet(path)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
