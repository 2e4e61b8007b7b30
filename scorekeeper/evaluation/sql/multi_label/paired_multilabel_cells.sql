-- reads: ml_paired, labels
-- creates: ml_paired_cells
-- A multi-label comparison's cells: per paired row and label, the truth, each run's verdict (right
-- before / after, against this run's truth) and probability (the other run's at its position of the
-- label, $positions).
CREATE TEMP TABLE ml_paired_cells AS
SELECT *, before = truth AS right_before, after = truth AS right_after
FROM (
    SELECT p.row_index, l.label_id, l.label_name, p.truth[l.label_id + 1] AS truth,
           list_contains(p.before, l.label_name) AS before, list_contains(p.after, l.label_name) AS after,
           p.after_probabilities[l.label_id + 1] AS prob_after,
           p.before_probabilities[$positions[l.label_id + 1]] AS prob_before
    FROM ml_paired AS p CROSS JOIN labels AS l
);
