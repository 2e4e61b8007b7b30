-- reads: <values>
-- creates: nothing
-- One numeric signal's reference values at the given quantiles, by DuckDB's discrete quantile: the
-- value at 1-based rank ceil(q m) of the m sorted non-null values (drift.py chooses q so that the
-- rank is exactly the decile rule's, far from any rounding).
SELECT quantile_disc(num, $quantiles::DOUBLE[])
FROM {values}
WHERE reference AND num IS NOT NULL;
