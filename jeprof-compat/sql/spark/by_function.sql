-- Generated from ../by_function.sql for spark by jeprof-compat's sql_views module; do not edit
-- (SQL_VIEWS_BLESS=1 cargo test -p jeprof-compat --lib sql_views writes it again).
-- Part of jeprof-compat's `query` views (docs/design.md §14). Every row is already unbiased, so a
-- plain SUM is the estimate, SUM of the variances its variance (kept as <figure>_var, so that view
-- results can be added up again), and its 95% interval is SUM ± 1.96·sqrt(SUM(var)), the lower end
-- clamped at 0 (<figure>_lo, <figure>_hi). Written in SQL that DataFusion and DuckDB run unchanged;
-- Spark's and ClickHouse's spellings are generated from it (src/sql_views.rs).
--
-- by_function: flat per function, charged to each row's `user_frame` (the first frame that is not
-- the allocator's, which is what jeprof's reports charge flat to). Rows without one count as '<unknown>'.
CREATE OR REPLACE TEMPORARY VIEW by_function AS
SELECT
    COALESCE(user_frame, '<unknown>') AS function,
    SUM(inuse_bytes) AS inuse_bytes,
    SUM(inuse_bytes_var) AS inuse_bytes_var,
    GREATEST(SUM(inuse_bytes) - 1.959963984540054 * SQRT(SUM(inuse_bytes_var)), 0) AS inuse_bytes_lo,
    SUM(inuse_bytes) + 1.959963984540054 * SQRT(SUM(inuse_bytes_var)) AS inuse_bytes_hi,
    SUM(inuse_objects) AS inuse_objects,
    SUM(inuse_objects_var) AS inuse_objects_var,
    GREATEST(SUM(inuse_objects) - 1.959963984540054 * SQRT(SUM(inuse_objects_var)), 0) AS inuse_objects_lo,
    SUM(inuse_objects) + 1.959963984540054 * SQRT(SUM(inuse_objects_var)) AS inuse_objects_hi,
    SUM(alloc_bytes) AS alloc_bytes,
    SUM(alloc_bytes_var) AS alloc_bytes_var,
    GREATEST(SUM(alloc_bytes) - 1.959963984540054 * SQRT(SUM(alloc_bytes_var)), 0) AS alloc_bytes_lo,
    SUM(alloc_bytes) + 1.959963984540054 * SQRT(SUM(alloc_bytes_var)) AS alloc_bytes_hi,
    SUM(alloc_objects) AS alloc_objects,
    SUM(alloc_objects_var) AS alloc_objects_var,
    GREATEST(SUM(alloc_objects) - 1.959963984540054 * SQRT(SUM(alloc_objects_var)), 0) AS alloc_objects_lo,
    SUM(alloc_objects) + 1.959963984540054 * SQRT(SUM(alloc_objects_var)) AS alloc_objects_hi,
    COUNT(DISTINCT dump) AS dumps
FROM rows
GROUP BY COALESCE(user_frame, '<unknown>');
