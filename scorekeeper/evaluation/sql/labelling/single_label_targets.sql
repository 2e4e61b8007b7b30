-- reads: evaluated, labels
-- creates: pp_targets
-- A single-label run's per-row targets Y of its prediction-powered metrics (docs/labelling.md), one
-- row per evaluated row and target: accuracy 1[predicted = truth]; per label k TP 1[pred = k and
-- truth = k], FP 1[pred = k and truth != k], FN 1[pred != k and truth = k]. Truth the model cannot
-- predict (true_id NULL) is never right: no TP or FN for any label, FP for the predicted label.
CREATE OR REPLACE TEMP TABLE pp_targets AS
WITH per_label AS (
    SELECT e.row_index, e.true_id, e.predicted_id, l.label_id, l.label_name FROM evaluated AS e CROSS JOIN labels AS l
)
SELECT row_index, 'accuracy' AS metric, '' AS term, CASE WHEN correct THEN 1.0 ELSE 0.0 END AS y FROM evaluated
UNION ALL
SELECT row_index, 'macro_f1', 'TP:' || label_name,
       CASE WHEN predicted_id = label_id AND true_id IS NOT NULL AND true_id = label_id THEN 1.0 ELSE 0.0 END FROM per_label
UNION ALL
SELECT row_index, 'macro_f1', 'FP:' || label_name,
       CASE WHEN predicted_id = label_id AND (true_id IS NULL OR true_id <> label_id) THEN 1.0 ELSE 0.0 END FROM per_label
UNION ALL
SELECT row_index, 'macro_f1', 'FN:' || label_name,
       CASE WHEN predicted_id <> label_id AND true_id IS NOT NULL AND true_id = label_id THEN 1.0 ELSE 0.0 END FROM per_label;
