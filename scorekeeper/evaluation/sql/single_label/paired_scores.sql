-- reads: paired, evaluated, predictions, other
-- creates: paired_scores
-- Both runs' probabilities for each paired row whose truth this model knows, the other run's put in
-- this run's label order ($positions: for each of this run's labels, its 1-based position in the
-- other run's labels). Expects: paired (with other_row_index), predictions, other.
CREATE OR REPLACE TEMP TABLE paired_scores AS
SELECT e.row_index, e.true_id,
       list_select(o.probabilities, $positions) AS before,
       p.probabilities AS after
FROM paired AS d
JOIN evaluated AS e ON e.row_index = d.row_index
JOIN predictions AS p ON p.row_index = d.row_index
JOIN other AS o ON o.row_index = d.other_row_index
WHERE e.true_id IS NOT NULL;
