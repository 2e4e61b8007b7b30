-- reads: reg_cells
-- creates: nothing
-- Histogram of the residuals (prediction - truth) per output of `reg_cells`: $bins equal-width bins
-- from the smallest to the largest residual, the last bin closed; one bin when they are all equal.
-- The bins are cut on half residuals (prediction and truth halved first: no overflow near the
-- largest doubles); lo and hi are whole again (infinite, and null in metrics.json, where a residual is not a double).
WITH residuals AS (
    SELECT output_id, prediction * 0.5 - truth * 0.5 AS residual FROM reg_cells
), span AS (
    SELECT output_id, min(residual) AS lo, max(residual) AS hi FROM residuals GROUP BY output_id
)
SELECT r.output_id, any_value(s.lo) * 2 AS lo, any_value(s.hi) * 2 AS hi,
       CASE WHEN s.hi > s.lo THEN least(CAST(floor((r.residual - s.lo) / (s.hi - s.lo) * $bins) AS INTEGER), $bins - 1) ELSE 0 END AS bin,
       count(*) AS n
FROM residuals AS r
JOIN span AS s ON s.output_id = r.output_id
GROUP BY r.output_id, bin
ORDER BY r.output_id, bin;
