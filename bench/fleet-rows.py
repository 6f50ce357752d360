#!/usr/bin/env python3
"""Writes OUT.parquet: 5,000,000 rows of schema v1 (docs/design.md §13) shaped as `jeprof-compat
export` writes the tool benchmark's fleet (1,000 dumps x 5,000 two-frame stacks over 5,000 leaf
functions, four sample periods, three builds, labels region and host, one dump every 86 s), with
made-up figures: what the SQL engines are timed on in bench/RESULTS.md. Needs pip's duckdb.
Usage: python3 bench/fleet-rows.py OUT.parquet"""
import sys

import duckdb

if len(sys.argv) != 2:
    sys.exit("usage: fleet-rows.py OUT.parquet")
con = duckdb.connect()
con.execute("SET TimeZone='UTC'")
con.execute(f"""
COPY (
SELECT 1::INTEGER AS schema_version,
  'dump-' || lpad(d::VARCHAR, 4, '0') || '.heap' AS dump,
  (10000 + d)::BIGINT AS pid,
  TIMESTAMPTZ '2026-11-24 00:00:00+00' + to_seconds(d * 86) AS time,
  'build-' || (d % 3)::VARCHAR AS build_id,
  'prog' AS binary,
  MAP {{'region': CASE WHEN d % 2 = 0 THEN 'eu' ELSE 'us' END, 'host': 'host-' || (d % 50)::VARCHAR}} AS labels,
  (524288 >> (d % 4))::BIGINT AS sample_period,
  NULL::BIGINT AS thread,
  ['leaf_function_' || ((s * 7919 + d) % 5000)::VARCHAR, 'main'] AS frames,
  ['prog+0x' || printf('%x', 4096 + s * 16), 'prog+0x' || printf('%x', 2097152 + s * 16)] AS locations,
  [(93824992231424 + s * 16)::UBIGINT, (93824994328576 + s * 16)::UBIGINT] AS addresses,
  'leaf_function_' || ((s * 7919 + d) % 5000)::VARCHAR AS leaf,
  'leaf_function_' || ((s * 7919 + d) % 5000)::VARCHAR AS user_frame,
  (1 + hash(d, s) % 1000)::DOUBLE AS inuse_objects,
  (524288.0 * (1 + hash(d, s) % 1000)) AS inuse_bytes,
  (2 + hash(d, s) % 1000)::DOUBLE AS alloc_objects,
  (524288.0 * (2 + hash(d, s) % 1000)) AS alloc_bytes,
  (1 + hash(d, s) % 1000)::DOUBLE AS inuse_objects_var,
  (2.7e11 * (1 + hash(d, s) % 1000)) AS inuse_bytes_var,
  (2 + hash(d, s) % 1000)::DOUBLE AS alloc_objects_var,
  (2.7e11 * (2 + hash(d, s) % 1000)) AS alloc_bytes_var
FROM range(1000) t(d), range(5000) u(s)
) TO '{sys.argv[1]}' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 65536)
""")
