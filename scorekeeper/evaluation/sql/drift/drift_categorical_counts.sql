-- reads: <values>
-- creates: nothing
-- One categorical signal's rows per value in each run (a: reference, b: current; null its own value).
INSERT INTO drift_categorical_counts
SELECT $signal, cat, count(*) FILTER (WHERE reference), count(*) FILTER (WHERE NOT reference)
FROM {values}
GROUP BY cat;
