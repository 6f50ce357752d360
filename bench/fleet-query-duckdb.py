#!/usr/bin/env python3
"""Times one SQL statement in DuckDB over fleet rows, with the views of jeprof-compat/sql/*.sql
defined (as `jeprof-compat query` defines them). Prints the query's own time on stderr; run it
under `/usr/bin/time -v` for the process's peak RSS. Needs pip's duckdb.
Usage: python3 bench/fleet-query-duckdb.py ROWS.parquet 'SQL'   (from the workspace root)"""
import glob
import sys
import time

import duckdb

if len(sys.argv) != 3:
    sys.exit(__doc__.splitlines()[-1].strip())
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
con.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet('{sys.argv[1]}')")
for f in sorted(glob.glob("jeprof-compat/sql/*.sql")):
    with open(f, encoding="utf-8") as sql:
        con.execute(sql.read())
start = time.time()
# As Arrow: no Python objects per value (and no pytz for timestamps).
result = con.sql(sys.argv[2]).to_arrow_table()
print(f"{time.time() - start:.3f} s, {result.num_rows} rows", file=sys.stderr)
