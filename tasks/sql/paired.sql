-- This run's evaluated rows beside the other run's prediction for the same row, both judged
-- against this run's ground truth (by label name). Expects: evaluated, staged (this run), other
-- (the other run's predictions.parquet). Macros: {this_key} / {other_key} are the join columns,
-- s.row_index / o.row_index for the same input, else the ids (as text when their types differ).
CREATE TEMP TABLE paired AS
SELECT e.row_index, o.row_index AS other_row_index, s.id, e.true_name,
       o.predicted_label AS before, o.score AS score_before,
       e.pred_name AS after, e.score AS score_after,
       (o.predicted_label = e.true_name) AS right_before,
       e.correct AS right_after
FROM evaluated AS e
JOIN staged AS s ON s.row_index = e.row_index
JOIN other AS o ON {other_key} = {this_key};
