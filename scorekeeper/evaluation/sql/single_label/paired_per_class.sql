-- reads: paired
-- creates: nothing
-- Precision, recall and F1 per label for each run over the paired rows (scikit-learn's semantics,
-- 0/0 counts as 0); a label one run never meets gets zeros on that side. A row is right or wrong
-- as `paired` judged it (each run by its own rule for the ground-truth column).
WITH sides AS (
    SELECT 'before' AS side, true_name, before_class AS pred, right_before AS is_right FROM paired
    UNION ALL
    SELECT 'after', true_name, after, right_after FROM paired
), contributions AS (
    SELECT side, true_name AS name, CASE WHEN is_right THEN 1 ELSE 0 END AS tp, 0 AS fp, CASE WHEN is_right THEN 0 ELSE 1 END AS fn
    FROM sides
    UNION ALL
    SELECT side, pred, 0, CASE WHEN is_right THEN 0 ELSE 1 END, 0
    FROM sides
), counts AS (
    SELECT side, name, sum(tp) AS tp, sum(fp) AS fp, sum(fn) AS fn
    FROM contributions
    GROUP BY side, name
)
SELECT name, side,
       CASE WHEN tp + fp = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fp) END AS precision,
       CASE WHEN tp + fn = 0 THEN 0.0 ELSE tp::DOUBLE / (tp + fn) END AS recall,
       CASE WHEN 2 * tp + fp + fn = 0 THEN 0.0 ELSE 2.0 * tp / (2 * tp + fp + fn) END AS f1
FROM counts
ORDER BY name, side;
