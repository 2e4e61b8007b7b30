-- reads: predictions
-- creates: nothing
-- This run's rows in the $bins equal-width bins of their score ([j/$bins, (j+1)/$bins), the last
-- holding 1.0): rows and mean score per bin.
SELECT least(CAST(floor(score * $bins) AS INTEGER), $bins - 1) AS bin, count(*) AS rows, avg(score) AS mean_score
FROM predictions
GROUP BY ALL
ORDER BY ALL;
