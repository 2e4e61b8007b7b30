-- reads: drift_value_counts
-- creates: nothing
-- The KS statistic times m n ($m, $n: each run's non-null values) from the counts per value, in
-- integers: the largest |A(x) n - B(x) m| over the values x, A and B the runs' values at or below x.
SELECT max(abs(gap))
FROM (
    SELECT sum(a::HUGEINT * $n - b::HUGEINT * $m) OVER (ORDER BY num) AS gap
    FROM drift_value_counts
    WHERE num IS NOT NULL
);
