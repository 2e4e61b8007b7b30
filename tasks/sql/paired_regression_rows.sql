-- A regression comparison's per-row differences (this run - the other run) of the metrics that are
-- means over rows: absolute error (mae), squared error (mse) and, where the truth is not 0,
-- absolute percentage error (mape; one output only: with several, mape averages each output's mean
-- over its own rows, which no per-row average is), each averaged over the row's outputs. Only rows with every
-- output's truth finite take part, so with one output (or every row complete) the mean of these
-- differences is the change of the metric. Expects: reg_paired (row_index, output, y, after, before).
CREATE OR REPLACE TEMP TABLE reg_paired_rows AS
SELECT row_index,
       avg(abs(after - y) - abs(before - y)) AS mae,
       avg((after - y) ^ 2 - (before - y) ^ 2) AS mse,
       CASE WHEN $outputs = 1 THEN avg(abs(after - y) / abs(y) - abs(before - y) / abs(y)) FILTER (WHERE y <> 0) END AS mape
FROM reg_paired
GROUP BY row_index
HAVING count(*) = $outputs;
