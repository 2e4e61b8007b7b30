-- reads: reg_cells
-- creates: nothing
-- Calibration by decile per output of `reg_cells`: the rows cut into 10 groups of (nearly) equal
-- size by prediction (ties broken by row_index, so the cut is reproducible), with the mean
-- prediction and the mean truth of each; a calibrated model has them equal.
SELECT output_id, decile, count(*) AS n, avg(prediction) AS mean_prediction, avg(truth) AS mean_truth,
       min(prediction) AS min_prediction, max(prediction) AS max_prediction
FROM (
    SELECT output_id, prediction, truth,
           ntile(10) OVER (PARTITION BY output_id ORDER BY prediction, row_index) AS decile
    FROM reg_cells
)
GROUP BY output_id, decile
ORDER BY output_id, decile;
