-- Headline metrics over `evaluated`. F1 and its averages follow scikit-learn: the classes are the
-- labels that occur as truth or prediction, and 0/0 counts as 0.
WITH classes AS (
    SELECT true_name AS name FROM evaluated UNION SELECT pred_name FROM evaluated
), per_class AS (
    SELECT c.name,
           count(*) FILTER (WHERE e.true_name = c.name AND e.pred_name = c.name) AS tp,
           count(*) FILTER (WHERE e.true_name <> c.name AND e.pred_name = c.name) AS fp,
           count(*) FILTER (WHERE e.true_name = c.name AND e.pred_name <> c.name) AS fn,
           count(*) FILTER (WHERE e.true_name = c.name) AS support
    FROM classes AS c CROSS JOIN evaluated AS e
    GROUP BY c.name
), scored AS (
    SELECT *, CASE WHEN 2 * tp + fp + fn = 0 THEN 0.0 ELSE 2.0 * tp / (2 * tp + fp + fn) END AS f1
    FROM per_class
)
SELECT (SELECT count(*) FROM evaluated) AS evaluated,
       (SELECT avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) FROM evaluated) AS accuracy,
       (SELECT avg(f1) FROM scored) AS macro_f1,
       (SELECT sum(f1 * support) / nullif(sum(support), 0) FROM scored) AS weighted_f1,
       (SELECT -avg(ln(least(greatest(p_true, $eps), 1 - $eps))) FROM evaluated WHERE true_id IS NOT NULL) AS log_loss,
       (SELECT count(*) FROM evaluated WHERE true_id IS NOT NULL) AS log_loss_rows;
