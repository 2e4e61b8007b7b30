-- reads: <values>, drift_ks_bounds
-- creates: nothing
-- The largest |gap| (times m n) inside the buckets whose bound exceeds the lower bound
-- (drift_ks_bounds.sql), exactly: the values between the candidates' smallest and largest (no other
-- value is in one) placed by the same macros and parameters as drift_buckets.sql, those of candidate
-- buckets sorted together, their running steps (+n for a reference value, -m for a current one)
-- offset per bucket by the gap before it less the steps of the candidate buckets before it. Buckets
-- are intervals in value order, so equal values share one; the frame takes in every value equal to
-- the row's, so a value both runs hold is read once both are counted. The statistic is the larger of
-- this and the lower bound.
WITH candidates AS (
    SELECT bucket, low, high,
           gap_before - coalesce(sum(steps) OVER (ORDER BY bucket ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS offset_
    FROM drift_ks_bounds
    WHERE bound > (SELECT max(abs(gap_after)) FROM drift_ks_bounds)
), placed AS (
    SELECT reference, num, drift_bucket(num, bin, $anchors::DOUBLE[], $scales::DOUBLE[], $k::BIGINT) AS bucket
    FROM (
        SELECT reference, num, drift_bin(num, $padded::DOUBLE[]) AS bin
        FROM {values}
        WHERE num BETWEEN (SELECT min(low) FROM candidates) AND (SELECT max(high) FROM candidates)
    )
)
SELECT max(abs(gap))
FROM (
    SELECT c.offset_ + sum(CASE WHEN p.reference THEN $n ELSE -$m END) OVER (
               ORDER BY p.num RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS gap
    FROM placed AS p JOIN candidates AS c ON c.bucket = p.bucket
);
