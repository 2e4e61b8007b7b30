-- reads: ml_rows, predictions
-- creates: pp_ml_truth, pp_targets
-- A multi-label run's per-row targets Y of its prediction-powered metrics (docs/labelling.md), one
-- row per row with ground truth (ml_rows.truth not null) and target: subset accuracy (every label's
-- decision right), per label TP, FP, FN of the prediction (predicted_labels; pp_names: the labels in
-- model order) against the truth, and micro_f1's TP, FP, FN summed over the labels.
CREATE OR REPLACE TEMP TABLE pp_ml_truth AS
WITH per_label AS (
    SELECT r.row_index,
           unnest(range(len(r.truth))) AS label_id,
           unnest(r.truth) AS truth,
           unnest(list_transform(r.truth, lambda t, i: list_contains(p.predicted_labels, (getvariable('pp_names')::VARCHAR[])[i]))) AS predicted
    FROM ml_rows AS r JOIN predictions AS p ON p.row_index = r.row_index
    WHERE r.truth IS NOT NULL
)
SELECT row_index, label_id, truth, predicted FROM per_label;

CREATE OR REPLACE TEMP TABLE pp_targets AS
SELECT row_index, 'subset_accuracy' AS metric, '' AS term, CASE WHEN bool_and(truth = predicted) THEN 1.0 ELSE 0.0 END AS y
FROM pp_ml_truth GROUP BY row_index
UNION ALL
SELECT row_index, 'macro_f1', 'TP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1], CASE WHEN predicted AND truth THEN 1.0 ELSE 0.0 END FROM pp_ml_truth
UNION ALL
SELECT row_index, 'macro_f1', 'FP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1], CASE WHEN predicted AND NOT truth THEN 1.0 ELSE 0.0 END FROM pp_ml_truth
UNION ALL
SELECT row_index, 'macro_f1', 'FN:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1], CASE WHEN truth AND NOT predicted THEN 1.0 ELSE 0.0 END FROM pp_ml_truth
UNION ALL
SELECT row_index, 'micro_f1', 'TP', count(*) FILTER (WHERE predicted AND truth)::DOUBLE FROM pp_ml_truth GROUP BY row_index
UNION ALL
SELECT row_index, 'micro_f1', 'FP', count(*) FILTER (WHERE predicted AND NOT truth)::DOUBLE FROM pp_ml_truth GROUP BY row_index
UNION ALL
SELECT row_index, 'micro_f1', 'FN', count(*) FILTER (WHERE truth AND NOT predicted)::DOUBLE FROM pp_ml_truth GROUP BY row_index;
