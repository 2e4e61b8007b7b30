-- reads: drift_buckets
-- creates: drift_ks_bounds
-- The KS statistic times m n ($m, $n: each run's non-null values) bounded per bucket, in integers.
-- With gap(x) = A(x) n - B(x) m (A, B: the runs' values at or below x), a bucket's `gap_after` (at
-- its last value) is exact, so their largest |gap_after| is a lower bound of the statistic; inside a
-- bucket A and B move only within its counts, so no gap there is larger than `bound`, the larger of
-- |A_before n - B_after m| and |A_after n - B_before m|. Only a bucket whose bound exceeds the lower
-- bound can hold a larger gap (drift_ks_refine.sql sorts those); `gap_before` is the gap before it,
-- `steps` its own change of the gap, `low` and `high` its values' range.
CREATE OR REPLACE TEMP TABLE drift_ks_bounds AS
WITH running AS (
    SELECT bucket, a, b, low, high, sum(a) OVER (ORDER BY bucket) AS a_after, sum(b) OVER (ORDER BY bucket) AS b_after
    FROM drift_buckets
    WHERE bucket IS NOT NULL
)
SELECT bucket, a, b, low, high,
       (a_after - a)::HUGEINT * $n - (b_after - b)::HUGEINT * $m AS gap_before,
       a_after::HUGEINT * $n - b_after::HUGEINT * $m AS gap_after,
       a::HUGEINT * $n - b::HUGEINT * $m AS steps,
       greatest(abs((a_after - a)::HUGEINT * $n - b_after::HUGEINT * $m),
                abs(a_after::HUGEINT * $n - (b_after - b)::HUGEINT * $m)) AS bound
FROM running;
