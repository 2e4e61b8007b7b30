-- reads: ml_cells
-- creates: nothing
-- Reliability of each label's probability over $bins equal-width bins (bin b holds probabilities in
-- [b/$bins, (b+1)/$bins), the last one holding 1.0, as calibration.sql bins single-label confidences), and of every cell
-- pooled under label_id -1: rows, mean probability and the fraction of those cells that are true.
-- A label's ECE is the row-weighted mean of |frequency - confidence| over its bins.
WITH binned AS (
    SELECT label_id, prob, truth,
           least(CAST(floor(prob * $bins) AS INTEGER), $bins - 1) AS bin
    FROM ml_cells
), both_levels AS (
    SELECT label_id, bin, prob, truth FROM binned
    UNION ALL
    SELECT -1, bin, prob, truth FROM binned
)
SELECT label_id, bin,
       count(*) AS n,
       avg(prob) AS confidence,
       avg(CASE WHEN truth THEN 1.0 ELSE 0.0 END) AS frequency
FROM both_levels
GROUP BY label_id, bin
ORDER BY label_id, bin;
