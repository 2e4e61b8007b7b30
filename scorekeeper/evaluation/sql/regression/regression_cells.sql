-- reads: reg_input
-- creates: reg_status, reg_cells
-- One row per (evaluated row, output) of a regression run, from the view `reg_input` (row_index,
-- id, text, prediction DOUBLE[], truth DOUBLE[]; scorekeeper/evaluation/regression.py makes it from `reg_rows`).
-- A row is evaluated when every output has a truth and both truth and prediction are finite.
-- Null or NaN is a missing truth: a row missing all of them has no ground truth, a row missing
-- some of them is counted apart (partial_truth), and so is a row with an infinite truth or a
-- prediction that is not a finite number (not_finite): neither is evaluated, neither is hidden.
CREATE OR REPLACE TEMP TABLE reg_status AS
WITH cells AS (
    SELECT row_index, unnest(truth) AS truth, unnest(prediction) AS prediction
    FROM reg_input
    WHERE truth IS NOT NULL AND prediction IS NOT NULL
), per_row AS (
    SELECT row_index,
           count(*) AS outputs,
           count(*) FILTER (WHERE truth IS NULL OR isnan(truth)) AS missing,
           count(*) FILTER (WHERE isinf(truth) OR prediction IS NULL OR NOT isfinite(prediction)) AS not_finite
    FROM cells
    GROUP BY row_index
)
SELECT i.row_index, i.id, i.text, i.prediction, i.truth,
       CASE WHEN i.truth IS NULL OR c.missing = c.outputs THEN 'no_truth'
            WHEN c.missing > 0 THEN 'partial_truth'
            WHEN i.prediction IS NULL OR c.not_finite > 0 THEN 'not_finite'
            ELSE 'evaluated'
       END AS status
FROM reg_input AS i
LEFT JOIN per_row AS c ON c.row_index = i.row_index;

CREATE OR REPLACE TEMP TABLE reg_cells AS
SELECT row_index, id, text,
       unnest(range(len(prediction))) AS output_id,
       unnest(prediction) AS prediction,
       unnest(truth) AS truth
FROM reg_status
WHERE status = 'evaluated';
