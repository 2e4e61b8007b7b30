-- reads: <staged>
-- creates: nothing
-- A slice column's values (categorical, as text) for every staged row of one run.
INSERT INTO drift_values
SELECT $side, $signal, NULL, {column}::VARCHAR FROM {staged};
