-- reads: <source>, drift_labels
-- creates: nothing
-- A multi-label run's signals: labels predicted per row (numeric) and, per label both runs know,
-- whether the row predicts it (categorical, '0' or '1').
INSERT INTO drift_values
SELECT $side, 'labels_per_row', len(predicted_labels), NULL FROM {source}
UNION ALL
SELECT $side, 'positive:' || l.label_name, NULL, CASE WHEN list_contains(p.predicted_labels, l.label_name) THEN '1' ELSE '0' END
FROM {source} AS p CROSS JOIN drift_labels AS l;
