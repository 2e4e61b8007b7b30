-- reads: <cells>
-- creates: nothing
-- Per output of {cells} (reg_cells' shape): scikit-learn's regression metrics, by their formulas (two passes: the
-- means first), computed so that no intermediate overflows or underflows at any magnitude: each
-- output's values are divided by its scale, a power of two near its largest |value| (exact), and
-- the columns ending in _s are in those units: the caller multiplies them back (once for mae,
-- twice for mse) and gives null where the result is not a representable double
-- (scorekeeper/evaluation/regression.py). r2 = 1 - SS_res / SS_tot and explained_variance = 1 -
-- var(truth - prediction) / var(truth) are scale-free and null when the truth is constant (min =
-- max; one row included), where scikit-learn answers 1.0 or 0.0 by convention (force_finite) or
-- divides by a rounding error. mape is mean(|error| / |truth|) over the cells whose truth is not 0
-- (a fraction, as scikit-learn's; mape_rows counts them), each ratio from the halves of truth and
-- prediction (no overflow) and their mean taken relative to the largest; null when there are
-- none; wmape is sum |error| / sum |truth|, a ratio of two scaled sums.
WITH scales AS (
    SELECT output_id,
           2.0 ^ greatest(-1021, coalesce(ceil(log2(nullif(greatest(max(abs(truth)), max(abs(prediction))), 0))), 0) - 1) AS scale
    FROM {cells}
    GROUP BY output_id
), scaled AS (
    SELECT c.output_id, c.truth, s.scale, c.truth / s.scale AS t, c.prediction / s.scale AS p,
           CASE WHEN c.truth <> 0 THEN abs(c.truth * 0.5 - c.prediction * 0.5) / abs(c.truth) * 2 END AS ape
    FROM {cells} AS c
    JOIN scales AS s ON s.output_id = c.output_id
), means AS (
    SELECT output_id, avg(t) AS mean_t, avg(t - p) AS mean_d, max(ape) AS top_ape
    FROM scaled
    GROUP BY output_id
)
SELECT c.output_id,
       count(*) AS n,
       any_value(c.scale) AS scale,
       avg(abs(c.t - c.p)) AS mae_s,
       avg((c.t - c.p) ^ 2) AS mse_s,
       sqrt(avg((c.t - c.p) ^ 2)) AS rmse_s,
       CASE WHEN min(c.t) < max(c.t)
            THEN 1 - sum((c.t - c.p) ^ 2) / sum((c.t - m.mean_t) ^ 2) END AS r2,
       CASE WHEN min(c.t) < max(c.t)
            THEN 1 - sum((c.t - c.p - m.mean_d) ^ 2) / sum((c.t - m.mean_t) ^ 2) END AS explained_variance,
       max(abs(c.t - c.p)) AS max_error_s,
       median(abs(c.t - c.p)) AS median_absolute_error_s,
       CASE WHEN any_value(m.top_ape) > 0 THEN any_value(m.top_ape) * avg(c.ape / m.top_ape) FILTER (WHERE c.truth <> 0)
            ELSE avg(c.ape) FILTER (WHERE c.truth <> 0) END AS mape,
       count(*) FILTER (WHERE c.truth <> 0) AS mape_rows,
       avg(abs(c.t - c.p)) / nullif(avg(abs(c.t)), 0) AS wmape,
       avg(c.t) AS mean_truth_s,
       avg(c.p) AS mean_prediction_s
FROM scaled AS c
JOIN means AS m ON m.output_id = c.output_id
GROUP BY c.output_id
ORDER BY c.output_id;
