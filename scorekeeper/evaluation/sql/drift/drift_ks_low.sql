-- reads: drift_ks_bounds
-- creates: nothing
-- The statistic's lower bound (times m n), and the buckets that may hold a larger gap and their values.
WITH low AS (SELECT coalesce(max(abs(gap_after)), 0) AS low FROM drift_ks_bounds)
SELECT low.low, count(k.bucket), coalesce(sum(k.a + k.b), 0)
FROM low LEFT JOIN drift_ks_bounds AS k ON k.bound > low.low
GROUP BY low.low;
