-- Part of jeprof-compat's `query` views (docs/design.md §14). Every row is already unbiased, so a
-- plain SUM is the estimate, SUM of the variances its variance (kept as <figure>_var, so that view
-- results can be added up again), and its 95% interval is SUM ± 1.96·sqrt(SUM(var)), the lower end
-- clamped at 0 (<figure>_lo, <figure>_hi). Written in SQL that DataFusion and DuckDB run unchanged;
-- Spark's and ClickHouse's spellings are generated from it (src/sql_views.rs).
--
-- over_time: per hour of the dumps' time (UTC), with how many dumps fell in each hour. In-use figures
-- are snapshots: a bucket holding two dumps of one process counts that heap twice, so divide by
-- `dumps` (or pick one dump per process) to read a fleet's heap at that hour.
CREATE VIEW over_time AS
SELECT
    date_trunc('hour', time) AS hour,
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
GROUP BY date_trunc('hour', time);
