-- reads: <ovr>, <labels>
-- creates: nothing
-- ROC and precision-recall curves per model label, thinned for plotting (reads the table {ovr}, in ovr.sql's shape, and the label names {labels}).
-- Points run from the highest threshold to the lowest. Each curve keeps, per bucket, the point at
-- the lowest threshold in it: ROC buckets cut the path length fpr + tpr (0..2) into 100 parts, PR
-- buckets cut recall (0..1) into 100 parts; so at most 100 points per curve, plus the start point
-- the caller adds ((0, 0) for ROC, (recall 0, precision 1) for PR, as scikit-learn's curves start).
WITH points AS (
    SELECT label_id, score,
           CASE WHEN negatives > 0 THEN fp::DOUBLE / negatives END AS fpr,
           tp::DOUBLE / positives AS tpr,
           tp::DOUBLE / (tp + fp) AS precision,
           negatives > 0 AS has_negatives
    FROM {ovr}
    WHERE positives > 0
), roc AS (
    SELECT 'roc' AS curve, label_id, least(CAST(floor((fpr + tpr) * 50) AS BIGINT), 99) AS bucket,
           arg_min(fpr, score) AS x, arg_min(tpr, score) AS y
    FROM points
    WHERE has_negatives
    GROUP BY ALL
), pr AS (
    SELECT 'pr' AS curve, label_id, least(CAST(floor(tpr * 100) AS BIGINT), 99) AS bucket,
           arg_min(tpr, score) AS x, arg_min(precision, score) AS y
    FROM points
    GROUP BY ALL
)
SELECT l.label_name, c.curve, c.x, c.y
FROM (SELECT * FROM roc UNION ALL SELECT * FROM pr) AS c
JOIN {labels} AS l ON l.label_id = c.label_id
ORDER BY c.curve, l.label_id, c.bucket;
