-- reads: paired_ranks
-- creates: nothing
-- Per side and label over paired_ranks: positives, negatives, ROC-AUC (the Mann-Whitney statistic,
-- ties one half, as ranking.sql; null unless both groups are present) and average precision.
SELECT side, label_id, max(positives) AS positives, max(negatives) AS negatives,
       CASE WHEN max(positives) > 0 AND max(negatives) > 0
            THEN sum(pos * (negatives - fp + neg / 2.0)) / (max(positives)::DOUBLE * max(negatives))
       END AS roc_auc,
       CASE WHEN max(positives) > 0 THEN sum(pos * (tp::DOUBLE / (tp + fp))) / max(positives) END AS average_precision
FROM paired_ranks
GROUP BY side, label_id
ORDER BY side, label_id;
