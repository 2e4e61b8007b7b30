-- reads: <labels>, <ovr>
-- creates: nothing
-- One-vs-rest ROC-AUC and average precision per model label (reads the table {ovr}, in ovr.sql's shape, and the label names {labels}).
-- ROC-AUC is the Mann-Whitney statistic: the chance that a positive outscores a negative, ties
-- counting one half; this equals the area under scikit-learn's trapezoid ROC curve. Null when the
-- class is absent from the truth or present in every row.
-- Average precision is scikit-learn's step-wise sum over distinct thresholds of
-- (R_n - R_{{n-1}}) * P_n, with R_n - R_{{n-1}} = pos / positives at threshold n. Null when the class
-- is absent from the truth (there is no recall to speak of); 1.0 when every row is of that class.
SELECT l.label_name,
       CASE WHEN max(o.positives) > 0 AND max(o.negatives) > 0
            THEN sum(o.pos * (o.negatives - o.fp + o.neg / 2.0)) / (max(o.positives)::DOUBLE * max(o.negatives))
       END AS roc_auc,
       CASE WHEN max(o.positives) > 0
            THEN sum(o.pos * (o.tp::DOUBLE / (o.tp + o.fp))) / max(o.positives)
       END AS average_precision
FROM {labels} AS l
LEFT JOIN {ovr} AS o ON o.label_id = l.label_id
GROUP BY l.label_id, l.label_name
ORDER BY l.label_id;
