-- reads: evaluated
-- creates: nothing
-- Reliability over $bins equal-width confidence bins: bin b holds scores in [b/$bins, (b+1)/$bins), the last one
-- also 1.0.
-- ECE is the support-weighted mean of |accuracy - confidence| over the bins.
SELECT bin,
       count(*) AS n,
       avg(score) AS confidence,
       avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) AS accuracy
FROM (
    SELECT score, correct,
           least(CAST(floor(score * $bins) AS INTEGER), $bins - 1) AS bin
    FROM evaluated
)
GROUP BY bin
ORDER BY bin;
