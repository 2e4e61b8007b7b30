-- reads: <cells>
-- creates: nothing
-- The one-vs-rest grouping of a multi-label run's cells {cells} (label_id, score, truth; ovr_running.sql
-- makes the ranking table of it): per model label and distinct score the true (pos) and false (neg)
-- cells, and once more with every cell pooled under label_id -1 (the micro average, as
-- scikit-learn's average="micro" ravels the indicator matrix).
SELECT label_id, score,
       count(*) FILTER (WHERE truth) AS pos,
       count(*) FILTER (WHERE NOT truth) AS neg
FROM {cells}
GROUP BY label_id, score
UNION ALL
SELECT -1 AS label_id, score,
       count(*) FILTER (WHERE truth) AS pos,
       count(*) FILTER (WHERE NOT truth) AS neg
FROM {cells}
GROUP BY score
