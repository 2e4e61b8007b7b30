-- reads: paired
-- creates: nothing
-- The paired rows by ECE bin (as calibration.sql: bin b holds scores in [b/$bins, (b+1)/$bins), the last one
-- also 1.0) and
-- correctness of each run, with the count and the mean, population variance and covariance of the
-- two runs' scores in each cell: what the ECE delta's bootstrap draws from.
WITH binned AS (
    SELECT least(CAST(floor(score_before * $bins) AS INTEGER), $bins - 1) AS bin_before,
           CASE WHEN right_before THEN 1 ELSE 0 END AS correct_before,
           least(CAST(floor(score_after * $bins) AS INTEGER), $bins - 1) AS bin_after,
           CASE WHEN right_after THEN 1 ELSE 0 END AS correct_after,
           score_before, score_after
    FROM paired
)
SELECT bin_before, correct_before, bin_after, correct_after, count(*) AS n,
       avg(score_before), avg(score_after), var_pop(score_before), var_pop(score_after), covar_pop(score_before, score_after)
FROM binned
GROUP BY ALL
ORDER BY ALL;
