-- reads: <values>
-- creates: nothing
-- One numeric signal's non-null reference values (m of the decile rule and of the KS statistic) and
-- their smallest and largest (where its first and last bins' buckets start and end).
SELECT count(num), min(num), max(num) FROM {values} WHERE reference;
