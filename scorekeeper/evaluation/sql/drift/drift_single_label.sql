-- reads: <source>
-- creates: nothing
-- A single-label run's signals: the predicted label (categorical) and its score (numeric).
INSERT INTO drift_values
SELECT $side, 'predicted_label', NULL, predicted_label FROM {source}
UNION ALL
SELECT $side, 'score', score, NULL FROM {source};
