-- One row per (evaluated row, output) of a regression run, from the view `reg_input` (row_index,
-- id, text, prediction DOUBLE[], truth DOUBLE[]; tasks/heads_metrics.py makes it from `reg_rows`).
-- A row is evaluated when every output has a truth and both truth and prediction are finite.
-- Null or NaN is a missing truth: a row missing all of them has no ground truth, a row missing
-- some of them is counted apart (partial_truth), and so is a row with an infinite truth or a
-- prediction that is not a finite number (not_finite): neither is evaluated, neither is hidden.
CREATE OR REPLACE TEMP TABLE reg_status AS
SELECT row_index, id, text, prediction, truth,
       CASE WHEN truth IS NULL OR len(list_filter(truth, t -> t IS NULL OR isnan(t))) = len(truth) THEN 'no_truth'
            WHEN len(list_filter(truth, t -> t IS NULL OR isnan(t))) > 0 THEN 'partial_truth'
            WHEN len(list_filter(truth, t -> isinf(t))) > 0
                 OR prediction IS NULL
                 OR len(list_filter(prediction, p -> p IS NULL OR NOT isfinite(p))) > 0 THEN 'not_finite'
            ELSE 'evaluated'
       END AS status
FROM reg_input;

CREATE OR REPLACE TEMP TABLE reg_cells AS
SELECT row_index, id, text,
       unnest(range(len(prediction))) AS output_id,
       unnest(prediction) AS prediction,
       unnest(truth) AS truth
FROM reg_status
WHERE status = 'evaluated';
