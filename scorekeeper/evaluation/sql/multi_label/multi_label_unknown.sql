-- reads: ml_truth_names, predictions
-- creates: nothing
-- Ground-truth label names (or ids) of evaluated rows that the model does not have, with how many
-- times each occurs.
SELECT n.raw, count(*) AS n
FROM ml_truth_names AS n
JOIN predictions AS p ON p.row_index = n.row_index
WHERE n.label_id IS NULL
GROUP BY n.raw
ORDER BY n DESC, n.raw;
