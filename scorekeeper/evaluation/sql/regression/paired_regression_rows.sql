-- reads: reg_paired
-- creates: reg_paired_rows
-- A regression comparison's per-row differences (this run - the other run) of the metrics that are
-- means over rows: absolute error (mae), squared error (mse), each averaged over the row's outputs,
-- and the absolute percentage error where the truth is not 0 (mape): with one output the row's own
-- (null where its truth is 0); with several, whose mape is the mean over outputs of each output's
-- mean over its own n_o rows, the row's sum over outputs of (difference * n / n_o) / outputs, so that
-- the mean over the n rows is that change exactly (null when an output has no such row). Only rows
-- with every output's truth finite take part. Expects: reg_paired (row_index, output, y, after, before).
CREATE OR REPLACE TEMP TABLE reg_paired_rows AS
WITH complete AS (
    SELECT * FROM reg_paired
    WHERE row_index IN (SELECT row_index FROM reg_paired GROUP BY row_index HAVING count(*) = $outputs)
), nonzero AS (
    SELECT output, count(*) FILTER (WHERE y <> 0) AS n_o, (SELECT count(DISTINCT row_index) FROM complete) AS n
    FROM complete
    GROUP BY output
), weighted AS (
    SELECT c.*, CASE WHEN c.y <> 0 THEN abs(c.after - c.y) / abs(c.y) - abs(c.before - c.y) / abs(c.y) END AS ape,
           z.n::DOUBLE / nullif(z.n_o, 0) AS weight
    FROM complete AS c
    JOIN nonzero AS z ON z.output = c.output
)
SELECT row_index,
       avg(abs(after - y) - abs(before - y)) AS mae,
       avg((after - y) ^ 2 - (before - y) ^ 2) AS mse,
       CASE WHEN $outputs = 1 THEN avg(ape) FILTER (WHERE y <> 0)
            WHEN (SELECT min(n_o) FROM nonzero) > 0 THEN coalesce(sum(ape * weight) FILTER (WHERE y <> 0), 0.0) / $outputs
       END AS mape
FROM weighted
GROUP BY row_index;
