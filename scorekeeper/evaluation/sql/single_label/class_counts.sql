-- reads: evaluated
-- creates: class_counts
-- For each label that occurs as truth or prediction: true positives, false positives, false
-- negatives, support and F1 over `evaluated` (0/0 counts as 0, as in scikit-learn). Both the
-- headline metrics and the per-class table read it.
CREATE TEMP VIEW class_counts AS
WITH classes AS (
    SELECT true_name AS name FROM evaluated UNION SELECT pred_name FROM evaluated
), counts AS (
    SELECT c.name,
           count(*) FILTER (WHERE e.true_name = c.name AND e.pred_name = c.name) AS tp,
           count(*) FILTER (WHERE e.true_name <> c.name AND e.pred_name = c.name) AS fp,
           count(*) FILTER (WHERE e.true_name = c.name AND e.pred_name <> c.name) AS fn,
           count(*) FILTER (WHERE e.true_name = c.name) AS support
    FROM classes AS c CROSS JOIN evaluated AS e
    GROUP BY c.name
)
SELECT *, CASE WHEN 2 * tp + fp + fn = 0 THEN 0.0 ELSE 2.0 * tp / (2 * tp + fp + fn) END AS f1
FROM counts;
