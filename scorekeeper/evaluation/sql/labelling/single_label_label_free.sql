-- reads: predictions, pp_focus
-- creates: pp_bin_means, pp_calibrated_of, pp_calibrated, pp_label_free, pp_cells, pp_label_totals
-- A single-label run's label-free predictions for its labelling plan and prediction-powered metrics
-- (docs/labelling.md). With a reference (pp_reference true): accuracy's f = a_b of the row's score bin,
-- (correct_b + s_b) / (rows_b + 1) from the reference's calibration bins (pp_correct, pp_bin_rows) and
-- this run's mean score s_b in the bin (pp_bin_means, a table: computed once); q_k = (truth_kb + p_k) /
-- (rows_kb + 1) at the row's bin of p_k (pp_truth, pp_rows: the reference's calibration_by_label),
-- renormalised over the row's labels. Without one: f = score, q = the probabilities. Bins: pp_bins
-- equal-width, the last holding 1.0. The table macro pp_calibrated_of(table): f and q per row of a
-- table of predictions; pp_calibrated: f and q per scored row (a view: a query that reads f alone computes no q). pp_label_free: one row per
-- scored row (f, u = sqrt(f (1 - f))). pp_cells: per row of pp_focus (the labelled plan rows'
-- predictions) and target, f. pp_label_totals: per label, the sum of f of its TP, FP and FN over every
-- scored row (one pass over the probabilities, grouped by label: TP_k sums q_k over the rows predicted
-- k, FP_k 1 - q_k over them, FN_k q_k over the others), a view: read only when the estimate against
-- the same reference has not made them (single_label_cell_totals.sql).
CREATE OR REPLACE TEMP TABLE pp_bin_means AS
SELECT least(CAST(floor(score * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) AS bin, avg(score) AS s_b
FROM predictions
GROUP BY ALL;

CREATE OR REPLACE TEMP MACRO pp_calibrated_of(source) AS TABLE
WITH binned AS (
    SELECT row_index, predicted_id, score, probabilities,
           least(CAST(floor(score * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) AS bin
    FROM query_table(source)
), calibrated AS (
    SELECT b.row_index, b.predicted_id, b.score, b.probabilities, b.bin, m.s_b,
           list_transform(b.probabilities, lambda p, i:
               (getvariable('pp_truth')[i][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + p)
               / (getvariable('pp_rows')[i][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + 1)) AS q_raw
    FROM binned AS b JOIN pp_bin_means AS m ON m.bin = b.bin
)
SELECT row_index, predicted_id,
       CASE WHEN getvariable('pp_reference') THEN (getvariable('pp_correct')[bin + 1] + s_b) / (getvariable('pp_bin_rows')[bin + 1] + 1) ELSE score END AS f,
       CASE WHEN getvariable('pp_reference') THEN list_transform(q_raw, lambda x: x / list_sum(q_raw)) ELSE probabilities END AS q
FROM calibrated;

CREATE OR REPLACE TEMP VIEW pp_calibrated AS SELECT * FROM pp_calibrated_of('predictions');

CREATE OR REPLACE TEMP VIEW pp_label_free AS
SELECT row_index, f, sqrt(greatest(f * (1 - f), 0)) AS u FROM pp_calibrated;

CREATE OR REPLACE TEMP VIEW pp_cells AS
WITH focus AS (
    SELECT * FROM pp_calibrated_of('pp_focus')
), per_label AS (
    SELECT row_index, predicted_id, unnest(range(len(q))) AS label_id, unnest(q) AS q FROM focus
)
SELECT row_index, 'accuracy' AS metric, '' AS term, f FROM focus
UNION ALL
SELECT row_index, 'macro_f1', 'TP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1],
       CASE WHEN predicted_id = label_id THEN q ELSE 0 END FROM per_label
UNION ALL
SELECT row_index, 'macro_f1', 'FP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1],
       CASE WHEN predicted_id = label_id THEN 1 - q ELSE 0 END FROM per_label
UNION ALL
SELECT row_index, 'macro_f1', 'FN:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1],
       CASE WHEN predicted_id = label_id THEN 0 ELSE q END FROM per_label;

CREATE OR REPLACE TEMP VIEW pp_label_totals AS
WITH per_label AS (
    SELECT predicted_id, unnest(range(len(q))) AS label_id, unnest(q) AS q FROM pp_calibrated
)
SELECT label_id,
       sum(CASE WHEN predicted_id = label_id THEN q ELSE 0 END) AS tp,
       sum(CASE WHEN predicted_id = label_id THEN 1 - q ELSE 0 END) AS fp,
       sum(CASE WHEN predicted_id = label_id THEN 0 ELSE q END) AS fn
FROM per_label
GROUP BY label_id;
