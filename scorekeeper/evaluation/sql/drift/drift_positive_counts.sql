-- reads: <reference>, <current>, drift_labels
-- creates: nothing
-- A multi-label run's per-label signals (categorical, `positive:NAME`, for each label both runs
-- know): rows predicting the label ('1') and the others ('0'), only the values either run has. Counted
-- from each row's distinct predicted labels, not from a row per (row, label).
INSERT INTO drift_categorical_counts
WITH sides AS (
    SELECT true AS reference, predicted_labels FROM {reference}
    UNION ALL
    SELECT false, predicted_labels FROM {current}
), totals AS (
    SELECT count(*) FILTER (WHERE reference) AS m, count(*) FILTER (WHERE NOT reference) AS n FROM sides
), positives AS (
    SELECT label, count(*) FILTER (WHERE reference) AS a, count(*) FILTER (WHERE NOT reference) AS b
    FROM (SELECT reference, unnest(list_distinct(predicted_labels)) AS label FROM sides)
    GROUP BY label
), cells AS (
    SELECT 'positive:' || l.label_name AS signal, '1' AS value, coalesce(p.a, 0) AS a, coalesce(p.b, 0) AS b
    FROM drift_labels AS l LEFT JOIN positives AS p ON p.label = l.label_name
    UNION ALL
    SELECT 'positive:' || l.label_name, '0', t.m - coalesce(p.a, 0), t.n - coalesce(p.b, 0)
    FROM drift_labels AS l CROSS JOIN totals AS t LEFT JOIN positives AS p ON p.label = l.label_name
)
SELECT signal, value, a, b FROM cells WHERE a + b > 0;
