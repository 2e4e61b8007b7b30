-- reads: <source>, drift_labels
-- creates: nothing
-- A regression run with several outputs: each output's prediction (numeric), `prediction:NAME`.
INSERT INTO drift_values
SELECT $side, 'prediction:' || l.label_name, p.prediction[l.label_id + 1], NULL
FROM {source} AS p CROSS JOIN drift_labels AS l;
