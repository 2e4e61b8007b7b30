-- reads: <cells>
-- creates: nothing
-- Kendall's tau-b per output of {cells} (reg_cells' shape), as scipy.stats.kendalltau computes it (variant "b"):
-- (C - D) / sqrt(n0 - n1) / sqrt(n0 - n2), with n0 = n(n-1)/2 pairs, n1 and n2 the pairs tied in
-- truth and in prediction, n3 those tied in both. Pairs untied in truth split into concordant C,
-- discordant D and tied-in-prediction (n2 - n3), so C - D = 2C - (n0 - n1 - n2 + n3), and only C
-- has to be counted: the pairs below each row in both ranks. That count is exact and takes
-- O(n log^2 n), not the n^2 of pairing rows: two prediction ranks compare at their highest
-- differing bit, so at each bit level b, within the rows that share the rank's bits above b, every
-- row with bit b set counts the rows with bit b clear and a lower truth rank (a window count).
-- Null when either side is constant or there are fewer than 2 rows.
WITH ranked AS (
    SELECT output_id, truth, prediction,
           dense_rank() OVER (PARTITION BY output_id ORDER BY truth) AS xr,
           dense_rank() OVER (PARTITION BY output_id ORDER BY prediction) - 1 AS yr
    FROM {cells}
), levels AS (
    SELECT output_id, unnest(range(0, 2 + CAST(floor(log2(max(yr) + 1)) AS BIGINT))) AS b
    FROM ranked
    GROUP BY output_id
), split AS (
    SELECT r.output_id, l.b, r.xr, r.yr >> (l.b + 1) AS prefix, (r.yr >> l.b) & 1 AS bit
    FROM ranked AS r
    JOIN levels AS l ON l.output_id = r.output_id
), below AS (
    SELECT output_id, bit,
           -- in truth-rank order, rows with bit b set before the others of the same truth rank: the running
           -- count of clear rows is then the count of those with a lower truth rank
           sum(1 - bit) OVER (PARTITION BY output_id, b, prefix ORDER BY xr, bit DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS lower
    FROM split
), concordant AS (
    SELECT output_id, coalesce(sum(lower) FILTER (WHERE bit = 1), 0) AS c
    FROM below
    GROUP BY output_id
), ties AS (
    SELECT output_id, sum(t * (t - 1) // 2) AS pairs, 'truth' AS side FROM (SELECT output_id, count(*) AS t FROM ranked GROUP BY output_id, truth) GROUP BY output_id
    UNION ALL
    SELECT output_id, sum(t * (t - 1) // 2), 'prediction' FROM (SELECT output_id, count(*) AS t FROM ranked GROUP BY output_id, prediction) GROUP BY output_id
    UNION ALL
    SELECT output_id, sum(t * (t - 1) // 2), 'both' FROM (SELECT output_id, count(*) AS t FROM ranked GROUP BY output_id, truth, prediction) GROUP BY output_id
), counts AS (
    SELECT c.output_id, c.c,
           (SELECT count(*) FROM ranked AS r WHERE r.output_id = c.output_id) AS n,
           sum(t.pairs) FILTER (WHERE t.side = 'truth') AS n1,
           sum(t.pairs) FILTER (WHERE t.side = 'prediction') AS n2,
           sum(t.pairs) FILTER (WHERE t.side = 'both') AS n3
    FROM concordant AS c
    JOIN ties AS t ON t.output_id = c.output_id
    GROUP BY c.output_id, c.c
)
SELECT output_id,
       CASE WHEN n * (n - 1) // 2 > n1 AND n * (n - 1) // 2 > n2
            THEN greatest(-1.0, least(1.0,
                 (2 * c - (n * (n - 1) // 2 - n1 - n2 + n3))::DOUBLE / sqrt((n * (n - 1) // 2 - n1)::DOUBLE) / sqrt((n * (n - 1) // 2 - n2)::DOUBLE)))
       END AS kendall_tau_b
FROM counts
ORDER BY output_id;
