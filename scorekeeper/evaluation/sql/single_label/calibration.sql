-- reads: evaluated
-- creates: nothing
-- Reliability over $bins equal-width confidence bins: bin b holds scores in (b/$bins, (b+1)/$bins].
-- ECE is the support-weighted mean of |accuracy - confidence| over the bins.
SELECT bin,
       count(*) AS n,
       avg(score) AS confidence,
       avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) AS accuracy
FROM (
    SELECT score, correct,
           least(greatest(CAST(ceil(score * $bins) AS INTEGER) - 1, 0), $bins - 1) AS bin
    FROM evaluated
)
GROUP BY bin
ORDER BY bin;
