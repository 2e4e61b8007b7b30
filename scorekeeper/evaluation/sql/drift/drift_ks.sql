-- reads: drift_values, drift_edges
-- creates: nothing
-- The exact two-sample Kolmogorov-Smirnov statistic of each numeric signal's non-null values:
-- the largest gap between the two runs' empirical distribution functions, over every value seen.
WITH counts AS (
    SELECT v.signal, v.num,
           count(*) FILTER (WHERE v.side = 'reference') AS a,
           count(*) FILTER (WHERE v.side = 'current') AS b
    FROM drift_values AS v SEMI JOIN drift_edges AS e ON e.signal = v.signal
    WHERE v.num IS NOT NULL
    GROUP BY v.signal, v.num
), running AS (
    SELECT signal,
           sum(a) OVER (PARTITION BY signal ORDER BY num) AS ca,
           sum(b) OVER (PARTITION BY signal ORDER BY num) AS cb,
           sum(a) OVER (PARTITION BY signal) AS ta,
           sum(b) OVER (PARTITION BY signal) AS tb
    FROM counts
)
SELECT signal, CASE WHEN max(ta) > 0 AND max(tb) > 0 THEN max(abs(ca / ta - cb / tb)) END AS ks
FROM running
GROUP BY signal;
