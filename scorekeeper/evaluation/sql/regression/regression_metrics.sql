-- reads: <cells>
-- creates: nothing
-- Per output of {cells} (reg_cells' shape): scikit-learn's regression metrics, by their formulas (two passes: the
-- means first). r2 = 1 - SS_res / SS_tot and explained_variance = 1 - var(truth - prediction) /
-- var(truth) are null when the truth is constant (min = max; one row included), where scikit-learn
-- answers 1.0 or 0.0 by convention (force_finite) or divides by a rounding error. mape is
-- mean(|error| / |truth|) over the cells whose truth is not 0 (a fraction, as scikit-learn's;
-- mape_rows counts them), null when there are none; wmape is sum |error| / sum |truth|.
WITH means AS (
    SELECT output_id, avg(truth) AS mean_truth, avg(prediction) AS mean_prediction, avg(truth - prediction) AS mean_error
    FROM {cells}
    GROUP BY output_id
)
SELECT c.output_id,
       count(*) AS n,
       avg(abs(c.truth - c.prediction)) AS mae,
       avg((c.truth - c.prediction) ^ 2) AS mse,
       sqrt(avg((c.truth - c.prediction) ^ 2)) AS rmse,
       CASE WHEN min(c.truth) < max(c.truth)
            THEN 1 - sum((c.truth - c.prediction) ^ 2) / sum((c.truth - m.mean_truth) ^ 2) END AS r2,
       CASE WHEN min(c.truth) < max(c.truth)
            THEN 1 - sum((c.truth - c.prediction - m.mean_error) ^ 2) / sum((c.truth - m.mean_truth) ^ 2) END AS explained_variance,
       max(abs(c.truth - c.prediction)) AS max_error,
       median(abs(c.truth - c.prediction)) AS median_absolute_error,
       avg(abs(c.truth - c.prediction) / abs(c.truth)) FILTER (WHERE c.truth <> 0) AS mape,
       count(*) FILTER (WHERE c.truth <> 0) AS mape_rows,
       sum(abs(c.truth - c.prediction)) / nullif(sum(abs(c.truth)), 0) AS wmape,
       any_value(m.mean_truth) AS mean_truth,
       any_value(m.mean_prediction) AS mean_prediction
FROM {cells} AS c
JOIN means AS m ON m.output_id = c.output_id
GROUP BY c.output_id
ORDER BY c.output_id;
