-- reads: predictions, pp_focus
-- creates: pp_ml_calibrated_of, pp_ml_calibrated, pp_label_free, pp_ml_cells_of, pp_cells, pp_label_totals
-- A multi-label run's label-free predictions for its labelling plan and prediction-powered metrics
-- (docs/labelling.md). Per label k, q_k = (truth_kb + p_k) / (rows_kb + 1) at the row's bin of p_k
-- (pp_truth, pp_rows: the reference's calibration_by_label; not renormalised) with a reference
-- (pp_reference true), else the probability p_k; a label is predicted when it is among the row's
-- predicted_labels (pp_names: the labels in model order). The table macro pp_ml_calibrated_of(table):
-- q per row of a table of predictions and label; pp_ml_calibrated: per scored row. pp_label_free: f =
-- subset accuracy's prod_k (q_k if predicted else 1 - q_k), u = the mean over labels of
-- sqrt(q_k (1 - q_k)), from each row's lists (no cell per label: the plan's design reads it twice over
-- every row). pp_ml_cells_of(table): per row and target, f (micro_f1 pools the labels: TP,
-- FP, FN summed over them); pp_cells: those of pp_focus (the labelled plan rows' predictions).
-- pp_label_totals: per label, the sum of f of its TP, FP and FN over every scored row (one pass over
-- the calibrated cells), a view: read only when the estimate against the same reference has not made
-- them (multi_label_cell_totals.sql).
CREATE OR REPLACE TEMP MACRO pp_ml_calibrated_of(source) AS TABLE
WITH per_label AS (
    SELECT row_index,
           unnest(range(len(probabilities))) AS label_id,
           unnest(probabilities) AS p,
           unnest(list_transform(probabilities, lambda p, i: list_contains(predicted_labels, (getvariable('pp_names')::VARCHAR[])[i]))) AS predicted
    FROM query_table(source)
)
SELECT row_index, label_id, predicted,
       CASE WHEN getvariable('pp_reference')
            THEN (getvariable('pp_truth')[label_id + 1][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + p)
                 / (getvariable('pp_rows')[label_id + 1][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + 1)
            ELSE p END AS q
FROM per_label;

CREATE OR REPLACE TEMP VIEW pp_ml_calibrated AS SELECT * FROM pp_ml_calibrated_of('predictions');

CREATE OR REPLACE TEMP VIEW pp_label_free AS
WITH calibrated AS (
    SELECT row_index,
           list_transform(probabilities, lambda p, i:
               CASE WHEN getvariable('pp_reference')
                    THEN (getvariable('pp_truth')[i][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + p)
                         / (getvariable('pp_rows')[i][least(CAST(floor(p * getvariable('pp_bins')) AS INTEGER), getvariable('pp_bins') - 1) + 1] + 1)
                    ELSE p END) AS q,
           list_transform(probabilities, lambda p, i: list_contains(predicted_labels, (getvariable('pp_names')::VARCHAR[])[i])) AS predicted
    FROM predictions
)
SELECT row_index,
       list_product(list_transform(q, lambda x, i: CASE WHEN predicted[i] THEN x ELSE 1 - x END)) AS f,
       list_avg(list_transform(q, lambda x: sqrt(greatest(x * (1 - x), 0)))) AS u
FROM calibrated;

CREATE OR REPLACE TEMP MACRO pp_ml_cells_of(source) AS TABLE
WITH calibrated AS (
    SELECT * FROM pp_ml_calibrated_of(source)
)
SELECT row_index, 'subset_accuracy' AS metric, '' AS term, product(CASE WHEN predicted THEN q ELSE 1 - q END) AS f
FROM calibrated GROUP BY row_index
UNION ALL
SELECT row_index, 'macro_f1', 'TP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1], CASE WHEN predicted THEN q ELSE 0 END FROM calibrated
UNION ALL
SELECT row_index, 'macro_f1', 'FP:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1], CASE WHEN predicted THEN 1 - q ELSE 0 END FROM calibrated
UNION ALL
SELECT row_index, 'macro_f1', 'FN:' || (getvariable('pp_names')::VARCHAR[])[label_id + 1], CASE WHEN predicted THEN 0 ELSE q END FROM calibrated
UNION ALL
SELECT row_index, 'micro_f1', 'TP', sum(CASE WHEN predicted THEN q ELSE 0 END) FROM calibrated GROUP BY row_index
UNION ALL
SELECT row_index, 'micro_f1', 'FP', sum(CASE WHEN predicted THEN 1 - q ELSE 0 END) FROM calibrated GROUP BY row_index
UNION ALL
SELECT row_index, 'micro_f1', 'FN', sum(CASE WHEN predicted THEN 0 ELSE q END) FROM calibrated GROUP BY row_index;

CREATE OR REPLACE TEMP VIEW pp_cells AS SELECT * FROM pp_ml_cells_of('pp_focus');

CREATE OR REPLACE TEMP VIEW pp_label_totals AS
SELECT label_id,
       sum(CASE WHEN predicted THEN q ELSE 0 END) AS tp,
       sum(CASE WHEN predicted THEN 1 - q ELSE 0 END) AS fp,
       sum(CASE WHEN predicted THEN 0 ELSE q END) AS fn
FROM pp_ml_calibrated
GROUP BY label_id;
