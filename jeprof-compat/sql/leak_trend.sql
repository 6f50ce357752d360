-- Part of jeprof-compat's `query` views (docs/design.md §14 and §18). Written in SQL that DataFusion
-- and DuckDB run unchanged.
--
-- leak_trend: `jeprof-compat leaks`' test for a fleet, per label pair (label, value) and user frame,
-- over hours. A process's figure for an hour is its last dump in that hour (in-use figures are
-- snapshots); the fleet's is the sum over its processes (pid), with variances adding. Over the hours
-- of each label pair, the last half of the time span is the window, cut into two steps whose ends
-- are the checkpoint hours c0 < c1 < c2 (the last). A function is growing when every hour from c1 on
-- holds significantly more than c0, and the last hour more than c1 (an intersection-union test: the
-- p-value is the largest of the one-sided ones). The variance of a difference is bounded with the
-- samples both hours share: at least n_b - (A_b - A_a) of the n_b samples live at b were live at a
-- (A: cumulative sampled allocations, from the alloc columns), each carrying the smaller of the two
-- hours' variance per sample. The normal tail uses erfc's rational approximation (fractional error
-- below 1.2e-7), as no engine shares an erfc. Benjamini-Hochberg at 5% over the functions of each
-- label pair gives `suspect`. Columns: label, value, function, hours, growth_bytes_per_hour and its
-- 95% interval (_lo, _hi) from c0 to the last hour, live_bytes (the last hour's), p_value, suspect.
CREATE VIEW leak_trend AS
WITH labelled AS (
    SELECT
        UNNEST(map_keys(labels)) AS label,
        UNNEST(map_values(labels)) AS value,
        dump, pid, time, user_frame, sample_period,
        inuse_objects, inuse_bytes, inuse_bytes_var, alloc_objects, alloc_bytes
    FROM rows
),
per_dump AS (
    -- A site's figures in one dump, with its sampled counts (jeprof's n, from each row's average size).
    SELECT
        label, value, dump, pid, time, user_frame,
        SUM(inuse_bytes) AS bytes,
        SUM(inuse_bytes_var) AS var,
        SUM(CASE WHEN inuse_objects > 0 AND inuse_bytes > 0
            THEN inuse_objects * (1 - EXP(-(inuse_bytes / inuse_objects) / sample_period)) ELSE 0 END) AS n,
        SUM(CASE WHEN alloc_objects > 0 AND alloc_bytes > 0
            THEN alloc_objects * (1 - EXP(-(alloc_bytes / alloc_objects) / sample_period)) ELSE 0 END) AS a
    FROM labelled
    GROUP BY label, value, dump, pid, time, user_frame
),
dumps AS (
    SELECT DISTINCT label, value, dump, pid, time FROM labelled
),
chosen AS (
    -- Each process's last dump of each hour.
    SELECT label, value, dump, date_trunc('hour', time) AS hour
    FROM (
        SELECT label, value, dump, time, ROW_NUMBER() OVER (
            PARTITION BY label, value, pid, date_trunc('hour', time) ORDER BY time DESC, dump DESC) AS k
        FROM dumps
    ) AS ranked
    WHERE k = 1
),
hours AS (
    SELECT DISTINCT label, value, hour FROM chosen
),
span AS (
    SELECT label, value, MIN(hour) AS first_hour, MAX(hour) AS last_hour, COUNT(*) AS hours
    FROM hours
    GROUP BY label, value
),
marks AS (
    -- The checkpoints: the first hour at or after the window's start and its middle, and the last.
    SELECT s.label AS label, s.value AS value, s.last_hour AS last_hour, s.hours AS hours,
        MIN(CASE WHEN EXTRACT(EPOCH FROM h.hour) >= (EXTRACT(EPOCH FROM s.last_hour) + EXTRACT(EPOCH FROM s.first_hour)) / 2
            THEN h.hour END) AS c0,
        MIN(CASE WHEN EXTRACT(EPOCH FROM h.hour) >= (3 * EXTRACT(EPOCH FROM s.last_hour) + EXTRACT(EPOCH FROM s.first_hour)) / 4
            THEN h.hour END) AS c1
    FROM span AS s JOIN hours AS h ON h.label = s.label AND h.value = s.value
    GROUP BY s.label, s.value, s.last_hour, s.hours
),
series AS (
    -- Per label pair, function and hour: the sum over the processes' chosen dumps.
    SELECT d.label AS label, d.value AS value, d.user_frame AS user_frame, c.hour AS hour,
        SUM(d.bytes) AS bytes, SUM(d.var) AS var, SUM(d.n) AS n, SUM(d.a) AS a
    FROM per_dump AS d
    JOIN chosen AS c ON c.label = d.label AND c.value = d.value AND c.dump = d.dump
    GROUP BY d.label, d.value, d.user_frame, c.hour
),
grid AS (
    -- Every function at every hour of its label pair (a zero where it had nothing).
    SELECT f.label AS label, f.value AS value, f.user_frame AS user_frame, h.hour AS hour,
        COALESCE(s.bytes, 0) AS bytes, COALESCE(s.var, 0) AS var,
        COALESCE(s.n, 0) AS n, COALESCE(s.a, 0) AS a
    FROM (SELECT DISTINCT label, value, user_frame FROM series) AS f
    JOIN hours AS h ON h.label = f.label AND h.value = f.value
    LEFT JOIN series AS s
        ON s.label = f.label AND s.value = f.value AND s.user_frame = f.user_frame AND s.hour = h.hour
),
pairs AS (
    -- The one-sided tests: (c0, every hour from c1 on) and (c1, the last hour).
    SELECT label, value, user_frame, b_hour AS base_hour, l_hour AS later_hour,
        -- Below 1e-6 of the figures is jeprof's integer rounding, not sampling (as in leaks).
        CASE WHEN ABS(l_bytes - b_bytes) <= 1e-6 * GREATEST(ABS(l_bytes), ABS(b_bytes)) THEN 0
            ELSE l_bytes - b_bytes END AS difference,
        CASE WHEN bound <= 1e-6 * (b_var + l_var) THEN 0 ELSE bound END AS variance
    FROM (
        SELECT b.label AS label, b.value AS value, b.user_frame AS user_frame, b.hour AS b_hour, l.hour AS l_hour,
            b.bytes AS b_bytes, l.bytes AS l_bytes, b.var AS b_var, l.var AS l_var,
            b.var + l.var - 2 * CASE
                WHEN l.a >= b.a AND b.n > 0 AND l.n > 0
                THEN LEAST(GREATEST(l.n - (l.a - b.a), 0), b.n) * LEAST(b.var / b.n, l.var / l.n)
                ELSE 0 END AS bound
        FROM grid AS b
        JOIN marks AS m ON m.label = b.label AND m.value = b.value
        JOIN grid AS l ON l.label = b.label AND l.value = b.value AND l.user_frame = b.user_frame
        WHERE (b.hour = m.c0 AND l.hour >= m.c1)
            OR (b.hour = m.c1 AND l.hour = m.last_hour AND m.c1 < m.last_hour)
    ) AS x
),
tails AS (
    SELECT label, value, user_frame, base_hour, later_hour, difference, variance,
        CASE
            WHEN variance > 0 THEN difference / SQRT(variance)
            WHEN difference > 0 THEN 1e9
            ELSE -1e9
        END AS z
    FROM pairs
),
tested AS (
    -- P(Z >= z) = erfc(z / sqrt 2) / 2, erfc by Numerical Recipes' erfcc.
    SELECT label, value, user_frame, base_hour, later_hour, difference, variance, z,
        CASE WHEN z >= 0 THEN e / 2 ELSE 1 - e / 2 END AS p
    FROM (
        SELECT *, t * EXP(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
            + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
            + t * (-0.82215223 + t * 0.17087277))))))))) AS e
        FROM (
            SELECT *, LEAST(ABS(z), 30) / SQRT(2.0) AS x, 1 / (1 + 0.5 * LEAST(ABS(z), 30) / SQRT(2.0)) AS t
            FROM tails
        ) AS prepared
    ) AS approximated
),
sites AS (
    SELECT t.label AS label, t.value AS value, t.user_frame AS user_frame, MAX(t.p) AS p_value, COUNT(*) AS tests
    FROM tested AS t
    GROUP BY t.label, t.value, t.user_frame
),
figures AS (
    -- Growth from c0 to the last hour, and the last hour's bytes.
    SELECT t.label AS label, t.value AS value, t.user_frame AS user_frame,
        t.difference / ((EXTRACT(EPOCH FROM m.last_hour) - EXTRACT(EPOCH FROM m.c0)) / 3600) AS growth_bytes_per_hour,
        1.959963984540054 * SQRT(t.variance) / ((EXTRACT(EPOCH FROM m.last_hour) - EXTRACT(EPOCH FROM m.c0)) / 3600) AS half_width,
        m.hours AS hours
    FROM tested AS t JOIN marks AS m ON m.label = t.label AND m.value = t.value
    WHERE t.base_hour = m.c0 AND t.later_hour = m.last_hour AND m.c0 < m.last_hour
),
ranked AS (
    SELECT s.*, ROW_NUMBER() OVER (PARTITION BY s.label, s.value ORDER BY s.p_value, s.user_frame) AS k,
        COUNT(*) OVER (PARTITION BY s.label, s.value) AS m
    FROM sites AS s
),
cut AS (
    SELECT *, MAX(CASE WHEN p_value <= k * 0.05 / m THEN p_value END)
        OVER (PARTITION BY label, value) AS cutoff
    FROM ranked
)
SELECT c.label AS label, c.value AS value, c.user_frame AS function, f.hours AS hours,
    f.growth_bytes_per_hour,
    f.growth_bytes_per_hour - f.half_width AS growth_bytes_per_hour_lo,
    f.growth_bytes_per_hour + f.half_width AS growth_bytes_per_hour_hi,
    g.bytes AS live_bytes,
    c.p_value,
    COALESCE(c.p_value <= c.cutoff, FALSE) AS suspect
FROM cut AS c
JOIN figures AS f ON f.label = c.label AND f.value = c.value AND f.user_frame = c.user_frame
JOIN marks AS m ON m.label = c.label AND m.value = c.value
JOIN grid AS g ON g.label = c.label AND g.value = c.value AND g.user_frame = c.user_frame AND g.hour = m.last_hour;
