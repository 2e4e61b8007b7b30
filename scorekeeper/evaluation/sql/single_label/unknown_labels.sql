-- reads: evaluated
-- creates: nothing
-- Ground-truth values the model cannot predict (under the column's rule), with their counts, as written.
SELECT raw_label, count(*) AS n
FROM evaluated
WHERE true_id IS NULL
GROUP BY raw_label
ORDER BY n DESC, raw_label;
