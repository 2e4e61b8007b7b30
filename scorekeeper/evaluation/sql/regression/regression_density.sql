-- reads: reg_cells
-- creates: nothing
-- Predicted against true per output of `reg_cells` as a $bins x $bins 2-D histogram over one range
-- for both axes (the smallest to the largest of truth and prediction, the last bin closed), for
-- plots of more rows than points can show. Only the cells that hold rows are returned.
-- Positions are computed on halves (no overflow of hi - lo near the largest doubles).
WITH span AS (
    SELECT output_id, least(min(truth), min(prediction)) AS lo, greatest(max(truth), max(prediction)) AS hi
    FROM reg_cells
    GROUP BY output_id
)
SELECT c.output_id, any_value(s.lo) AS lo, any_value(s.hi) AS hi,
       CASE WHEN s.hi > s.lo THEN least(CAST(floor((c.truth * 0.5 - s.lo * 0.5) / (s.hi * 0.5 - s.lo * 0.5) * $bins) AS INTEGER), $bins - 1) ELSE 0 END AS truth_bin,
       CASE WHEN s.hi > s.lo THEN least(CAST(floor((c.prediction * 0.5 - s.lo * 0.5) / (s.hi * 0.5 - s.lo * 0.5) * $bins) AS INTEGER), $bins - 1) ELSE 0 END AS prediction_bin,
       count(*) AS n
FROM reg_cells AS c
JOIN span AS s ON s.output_id = c.output_id
GROUP BY c.output_id, truth_bin, prediction_bin
ORDER BY c.output_id, truth_bin, prediction_bin;
