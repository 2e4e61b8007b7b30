-- reads: other_labels, evaluated, staged, other, labels
-- creates: paired
-- This run's evaluated rows beside the other run's prediction for the same row, both judged
-- against this run's ground truth. Each run's prediction is judged by the rule the ground-truth
-- column has against that run's labels ($other_rule for the other run, other_labels its labels: the rule
-- its own evaluation of this truth uses), so on the same input and truth the paired accuracy
-- delta is the difference of the two runs' accuracies. `before_class` is the other run's
-- prediction in this run's label names when matched by id (labels spelled differently are the
-- same class), for the per-class deltas and the "other" flips.
-- Expects: evaluated, staged (this run), other (the other run's predictions.parquet), labels, other_labels.
-- Macros: {this_key} / {other_key} are the join columns, s.row_index / o.row_index for the same
-- input, else the ids (as text when their types differ).
CREATE TEMP TABLE paired AS
SELECT e.row_index, o.row_index AS other_row_index, s.id, e.true_name,
       o.predicted_label AS before, o.score AS score_before,
       e.pred_name AS after, e.score AS score_after,
       coalesce(CASE $other_rule
                    WHEN 'id' THEN o.predicted_id = e.truth_id
                    WHEN 'name' THEN o.predicted_label = e.raw_label
                    ELSE o.predicted_label = e.raw_label
                         OR (e.raw_label NOT IN (SELECT label_name FROM other_labels) AND o.predicted_id = e.truth_id) END,
                false) AS right_before,
       e.correct AS right_after,
       CASE WHEN $other_rule = 'name' THEN o.predicted_label ELSE coalesce(bl.label_name, o.predicted_label) END AS before_class
FROM evaluated AS e
JOIN staged AS s ON s.row_index = e.row_index
JOIN other AS o ON {other_key} = {this_key}
LEFT JOIN labels AS bl ON bl.label_id = o.predicted_id;
