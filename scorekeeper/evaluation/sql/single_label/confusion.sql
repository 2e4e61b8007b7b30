-- reads: evaluated
-- creates: nothing
-- Counts of (true label, predicted label) pairs.
SELECT true_name, pred_name, count(*) AS n
FROM evaluated
GROUP BY true_name, pred_name
ORDER BY true_name, pred_name;
