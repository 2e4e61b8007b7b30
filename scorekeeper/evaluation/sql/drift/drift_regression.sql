-- reads: <source>
-- creates: nothing
-- A one-output regression run's signal: the prediction (numeric).
INSERT INTO drift_values
SELECT $side, 'prediction', prediction, NULL FROM {source};
