-- reads: evaluated, class_counts
-- creates: nothing
-- Headline metrics over `evaluated`. F1 and its averages follow scikit-learn: the classes are the
-- labels that occur as truth or prediction (class_counts), and 0/0 counts as 0.
SELECT (SELECT count(*) FROM evaluated) AS evaluated,
       (SELECT avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) FROM evaluated) AS accuracy,
       (SELECT avg(f1) FROM class_counts) AS macro_f1,
       (SELECT sum(f1 * support) / nullif(sum(support), 0) FROM class_counts) AS weighted_f1,
       (SELECT -avg(ln(least(greatest(p_true, $eps), 1 - $eps))) FROM evaluated WHERE true_id IS NOT NULL) AS log_loss,
       (SELECT count(*) FROM evaluated WHERE true_id IS NOT NULL) AS log_loss_rows;
