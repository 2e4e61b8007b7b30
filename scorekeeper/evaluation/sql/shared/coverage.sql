-- reads: truth, predictions
-- creates: nothing
-- Ground truth without a prediction, and predictions without ground truth.
SELECT (SELECT count(*) FROM truth AS t
        WHERE t.row_index IS NULL OR NOT EXISTS (SELECT 1 FROM predictions AS p WHERE p.row_index = t.row_index)) AS missing_predictions,
       (SELECT count(*) FROM predictions AS p
        WHERE NOT EXISTS (SELECT 1 FROM truth AS t WHERE t.row_index = p.row_index)) AS unmatched_predictions,
       (SELECT count(*) FROM predictions) AS scored;
