-- reads: predictions
-- creates: pp_calibrated, pp_label_free, pp_cells
-- A single-label run's label-free predictions for its labelling plan and prediction-powered metrics
-- (docs/labelling.md). With a reference (pp_reference true): accuracy's f = a_b of the row's score bin,
-- (correct_b + s_b) / (rows_b + 1) from the reference's calibration bins (pp_correct, pp_bin_rows) and
-- this run's mean score s_b in the bin; q_k = (truth_kb + p_k) / (rows_kb + 1) at the row's bin of
-- p_k (pp_truth, pp_rows: the reference's calibration_by_label), renormalised over the row's labels.
-- Without one: f = score, q = the probabilities. Bins: pp_bins equal-width, the last holding 1.0.
-- pp_label_free: one row per scored row (f, u = sqrt(f (1 - f))). pp_cells: per row and target, f.
CREATE OR REPLACE TEMP VIEW pp_calibrated AS
WITH binned AS (
    SELECT row_index, predicted_id, score, probabilities,
           least(CAST(floor(score * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) AS bin
    FROM predictions
), bin_means AS (
    SELECT bin, avg(score) AS s_b FROM binned GROUP BY bin
), calibrated AS (
    SELECT b.row_index, b.predicted_id, b.score, b.probabilities, b.bin, m.s_b,
           list_transform(b.probabilities, lambda p, i:
               (getvariable('pp_truth')[i][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + p)
               / (getvariable('pp_rows')[i][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + 1)) AS q_raw
    FROM binned AS b JOIN bin_means AS m ON m.bin = b.bin
)
SELECT row_index, predicted_id,
       CASE WHEN getvariable('pp_reference') THEN (getvariable('pp_correct')[bin + 1] + s_b) / (getvariable('pp_bin_rows')[bin + 1] + 1) ELSE score END AS f,
       CASE WHEN getvariable('pp_reference') THEN list_transform(q_raw, lambda x: x / list_sum(q_raw)) ELSE probabilities END AS q
FROM calibrated;

CREATE OR REPLACE TEMP VIEW pp_label_free AS
SELECT row_index, f, sqrt(greatest(f * (1 - f), 0)) AS u FROM pp_calibrated;

CREATE OR REPLACE TEMP VIEW pp_cells AS
WITH per_label AS (
    SELECT row_index, predicted_id, unnest(range(len(q))) AS label_id, unnest(q) AS q FROM pp_calibrated
)
SELECT row_index, 'accuracy' AS metric, '' AS term, f FROM pp_calibrated
UNION ALL
SELECT row_index, 'macro_f1', 'TP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1],
       CASE WHEN predicted_id = label_id THEN q ELSE 0 END FROM per_label
UNION ALL
SELECT row_index, 'macro_f1', 'FP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1],
       CASE WHEN predicted_id = label_id THEN 1 - q ELSE 0 END FROM per_label
UNION ALL
SELECT row_index, 'macro_f1', 'FN:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1],
       CASE WHEN predicted_id = label_id THEN 0 ELSE q END FROM per_label;
