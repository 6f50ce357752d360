#!/usr/bin/env python3
"""The five views of jeprof-compat/sql over the same export in every engine, side by side
(bench/RESULTS.md): DataFusion (`jeprof-compat query`), DuckDB, ClickHouse (chDB) and Spark (local
mode; all but leak_trend), each given the statements `jeprof-compat query --print-sql ENGINE`
prints. Per view and engine: the rows, the summed in-use bytes (live_bytes for leak_trend, and
its suspects), the largest group, and the largest relative difference of any figure of any row
from DataFusion's. Needs duckdb, chdb, pyspark (and java) in the Python running it.

Usage: python3 bench/fleet-views.py JEPROF_COMPAT ROWS_DIR   (a jeprof-compat built with `sql`)"""
import csv
import io
import os
import subprocess
import sys
import tempfile

VIEWS = ["by_function", "by_leaf", "by_label", "over_time", "leak_trend"]
KEYS = {
    "by_function": ["function"],
    "by_leaf": ["leaf"],
    "by_label": ["label", "value"],
    "over_time": ["hour"],
    "leak_trend": ["label", "value", "function"],
}


def statements(tool, engine, rows):
    return subprocess.run([tool, "query", "--print-sql", engine, rows], check=True,
                          capture_output=True, text=True).stdout


def number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def normalise(view, records):
    """{key: {column: float}} from a list of dicts; times as epoch seconds, booleans as 0/1."""
    import datetime
    out = {}
    for r in records:
        key = []
        for k in KEYS[view]:
            v = r[k]
            if isinstance(v, datetime.datetime):
                v = int(v.replace(tzinfo=v.tzinfo or datetime.timezone.utc).timestamp())
            elif isinstance(v, str) and view == "over_time":
                moment = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=datetime.timezone.utc)
                v = int(moment.timestamp())
            key.append(str(v))
        figures = {}
        for c, v in r.items():
            if c in KEYS[view]:
                continue
            if isinstance(v, bool) or v in ("true", "false"):
                v = 1.0 if v in (True, "true") else 0.0
            figures[c] = number(v)
        out[tuple(key)] = figures
    return out


def datafusion(tool, rows, view):
    text = subprocess.run([tool, "query", "--csv", f"SELECT * FROM {view}", rows], check=True,
                          capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def duckdb_views(tool, rows):
    import duckdb
    con = duckdb.connect()
    con.execute(statements(tool, "duckdb", rows))
    out = {}
    for view in VIEWS:
        # Through Arrow: DuckDB's own rows need pytz for timestamps with a zone.
        out[view] = con.sql(f"SELECT * FROM {view}").to_arrow_table().to_pylist()
    return out


def clickhouse_views(tool, rows):
    from chdb import session
    s = session.Session()
    s.query("CREATE DATABASE IF NOT EXISTS fleet ENGINE = Atomic")
    s.query("USE fleet")
    for statement in statements(tool, "clickhouse", rows).split(";\n"):
        if statement.strip():
            s.query(statement)
    out = {}
    for view in VIEWS:
        text = s.query(f"SELECT * FROM {view}", "CSVWithNames").bytes().decode()
        out[view] = list(csv.DictReader(io.StringIO(text)))
    return out


def spark_views(tool, rows):
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    try:
        for statement in statements(tool, "spark", rows).split(";\n"):
            body = "\n".join(l for l in statement.splitlines() if not l.startswith("--")).strip()
            if body:
                spark.sql(body)
        return {view: [r.asDict() for r in spark.sql(f"SELECT * FROM {view}").collect()]
                for view in VIEWS if view != "leak_trend"}
    finally:
        spark.stop()


def summary(view, table, reference):
    figure = "live_bytes" if view == "leak_trend" else "inuse_bytes"
    if not table:
        return "0 rows" + (f", MISSING {len(reference)}" if reference else "")
    total = sum(f[figure] or 0.0 for f in table.values())
    top = max(table.items(), key=lambda kv: kv[1][figure] or 0.0)
    worst = 0.0
    for key, want in reference.items():
        got = table.get(key)
        if got is None:
            return f"{len(table)} rows, MISSING {key}"
        for c, w in want.items():
            g = got.get(c)
            if w is None or g is None:
                continue
            worst = max(worst, abs(g - w) / max(abs(w), abs(g), 1.0))
    extra = ""
    if view == "leak_trend":
        extra = f", {sum(1 for f in table.values() if f['suspect'])} suspects"
    return (f"{len(table)} rows, {figure} sum {total:.6g}{extra}, largest {'/'.join(top[0])[:40]} "
            f"{top[1][figure]:.6g}; max rel. diff {worst:.1e}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[-1].strip())
    tool, rows = sys.argv[1], sys.argv[2]
    engines = {"datafusion": {v: datafusion(tool, rows, v) for v in VIEWS}}
    engines["duckdb"] = duckdb_views(tool, rows)
    engines["clickhouse"] = clickhouse_views(tool, rows)
    engines["spark"] = spark_views(tool, rows)
    for view in VIEWS:
        reference = normalise(view, engines["datafusion"][view])
        print(f"{view}:")
        for engine, results in engines.items():
            if view in results:
                print(f"  {engine:10} {summary(view, normalise(view, results[view]), reference)}")
            else:
                print(f"  {engine:10} (does not run it)")


if __name__ == "__main__":
    main()
