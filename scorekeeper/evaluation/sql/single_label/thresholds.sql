-- reads: cuts, evaluated
-- creates: nothing
-- Coverage against quality at confidence thresholds (expects a `cuts (threshold DOUBLE)` table):
-- the rows kept (score >= threshold), their accuracy and their macro precision, recall and F1 with
-- scikit-learn's semantics (classes = labels occurring as truth or prediction among the kept rows,
-- 0/0 counts as 0).
WITH kept AS (
    SELECT c.threshold, e.true_name, e.pred_name, e.correct
    FROM cuts AS c
    JOIN evaluated AS e ON e.score >= c.threshold
), contributions AS (
    SELECT threshold, true_name AS name, CASE WHEN correct THEN 1 ELSE 0 END AS tp, 0 AS fp, CASE WHEN correct THEN 0 ELSE 1 END AS fn
    FROM kept
    UNION ALL
    SELECT threshold, pred_name, 0, CASE WHEN correct THEN 0 ELSE 1 END, 0
    FROM kept
), per_class AS (
    SELECT threshold, name, sum(tp) AS tp, sum(fp) AS fp, sum(fn) AS fn
    FROM contributions
    GROUP BY threshold, name
), macro AS (
    SELECT threshold,
           avg(CASE WHEN tp + fp = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fp) END) AS macro_precision,
           avg(CASE WHEN tp + fn = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fn) END) AS macro_recall,
           avg(CASE WHEN 2 * tp + fp + fn = 0 THEN 0.0 ELSE 2.0 * tp / (2 * tp + fp + fn) END) AS macro_f1
    FROM per_class
    GROUP BY threshold
), counts AS (
    SELECT threshold, count(*) AS rows, avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) AS accuracy
    FROM kept
    GROUP BY threshold
)
SELECT c.threshold, coalesce(n.rows, 0) AS rows, n.accuracy, m.macro_precision, m.macro_recall, m.macro_f1
FROM cuts AS c
LEFT JOIN counts AS n ON n.threshold = c.threshold
LEFT JOIN macro AS m ON m.threshold = c.threshold
ORDER BY c.threshold;
