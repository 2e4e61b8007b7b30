-- Regression rows with both a prediction and ground truth, one row per (row, output):
-- y (the truth), yhat (the prediction). One output: prediction and value are numbers; several:
-- lists in output order. Expects: truth (row_index, id, value), predictions (row_index, id,
-- prediction), labels (label_id, label_name: the outputs).
CREATE TEMP TABLE reg_evaluated AS
SELECT p.row_index, p.id, t.value AS truth, p.prediction
FROM predictions AS p
JOIN truth AS t ON t.row_index = p.row_index;

CREATE TEMP TABLE reg_cells AS
SELECT e.row_index, l.label_id AS output_id, l.label_name AS output,
       {truth_at} AS y, {prediction_at} AS yhat
FROM reg_evaluated AS e
CROSS JOIN labels AS l
WHERE {truth_at} IS NOT NULL;
