-- reads: <values>
-- creates: nothing
-- The KS statistic times m n ($m, $n: each run's non-null values) after one sort of every value: the
-- largest |A(x) n - B(x) m| over the values x, as the running steps (+n for a reference value, -m for
-- a current one); the frame takes in every value equal to the row's, so a value both runs hold is
-- read once both are counted. For runs whose bucket bounds leave most values to sort anyway.
SELECT max(abs(gap))
FROM (
    SELECT sum(CASE WHEN reference THEN $n ELSE -$m END) OVER (ORDER BY num RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS gap
    FROM {values}
    WHERE num IS NOT NULL
);
