-- reads: reg_cells
-- creates: nothing
-- Calibration by decile per output of `reg_cells`: the rows cut into 10 groups of (nearly) equal
-- size by prediction (ties broken by row_index, so the cut is reproducible), with the mean
-- prediction and the mean truth of each; a calibrated model has them equal. The means are taken
-- in units of the output's largest |value| (a sum of values near the largest double would overflow).
WITH scales AS (
    SELECT output_id, coalesce(nullif(greatest(max(abs(truth)), max(abs(prediction))), 0), 1.0) AS scale
    FROM reg_cells
    GROUP BY output_id
)
SELECT output_id, decile, count(*) AS n, avg(prediction / scale) * any_value(scale) AS mean_prediction,
       avg(truth / scale) * any_value(scale) AS mean_truth, min(prediction) AS min_prediction, max(prediction) AS max_prediction
FROM (
    SELECT c.output_id, c.prediction, c.truth, s.scale,
           ntile(10) OVER (PARTITION BY c.output_id ORDER BY c.prediction, c.row_index) AS decile
    FROM reg_cells AS c
    JOIN scales AS s ON s.output_id = c.output_id
)
GROUP BY output_id, decile
ORDER BY output_id, decile;
