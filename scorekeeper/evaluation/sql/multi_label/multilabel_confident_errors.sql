-- reads: ml_cells, ml_labels
-- creates: nothing
-- The most confident wrong labels: cells whose prediction disagrees with the truth, farthest from
-- the truth first (a false positive by its probability, a false negative by 1 - probability).
SELECT c.row_index, c.id, l.label_name, c.truth, c.prob
FROM ml_cells AS c
JOIN ml_labels AS l ON l.label_id = c.label_id
WHERE c.predicted <> c.truth
ORDER BY abs(c.prob - CASE WHEN c.truth THEN 1.0 ELSE 0.0 END) DESC, c.row_index, c.label_id
LIMIT $limit;
