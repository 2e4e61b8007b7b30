-- Precision, recall, F1 and support for each label that occurs as truth or prediction.
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
SELECT name,
       CASE WHEN tp + fp = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fp) END AS precision,
       CASE WHEN tp + fn = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fn) END AS recall,
       CASE WHEN 2 * tp + fp + fn = 0 THEN 0.0 ELSE 2.0 * tp / (2 * tp + fp + fn) END AS f1,
       support
FROM counts
ORDER BY name;
