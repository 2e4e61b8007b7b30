-- reads: ml_rows, predictions, staged, other
-- creates: ml_paired
-- A multi-label comparison's paired rows: each evaluated row of this run with the other run's row
-- it is matched to ({other_key} = {this_key}: row_index on the same input, else the id), both runs'
-- predicted label sets and probabilities.
CREATE TEMP TABLE ml_paired AS
SELECT r.row_index, r.truth, o.predicted_labels AS before, p.predicted_labels AS after,
       o.probabilities AS before_probabilities, r.probabilities AS after_probabilities
FROM ml_rows AS r
JOIN predictions AS p ON p.row_index = r.row_index
JOIN staged AS s ON s.row_index = r.row_index
JOIN other AS o ON {other_key} = {this_key}
WHERE r.truth IS NOT NULL;
