-- reads: class_counts
-- creates: nothing
-- Precision, recall, F1 and support for each label that occurs as truth or prediction.
SELECT name,
       CASE WHEN tp + fp = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fp) END AS precision,
       CASE WHEN tp + fn = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fn) END AS recall,
       f1,
       support
FROM class_counts
ORDER BY name;
