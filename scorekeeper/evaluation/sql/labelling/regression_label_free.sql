-- reads: predictions, pp_focus
-- creates: pp_reg_f, pp_reg_cells_of, pp_reg_cells, pp_label_free_f, pp_label_free, pp_cells, pp_cell_totals
-- A regression run's label-free predictions for its labelling plan and prediction-powered mae
-- (docs/labelling.md): per output o, f_o = the reference's MAE in the row's bin of the prediction
-- (pp_edges[o]: the reference's residual_bins edges, bin = the edges strictly below the prediction;
-- pp_maes[o]: each bin's MAE, an empty bin's the output's overall) with a reference (pp_reference true),
-- else 0 (the macro pp_reg_f(y_hat, o), o from 1). {prediction} is the predictions' prediction
-- column as a list (one element per output). The table macro pp_reg_cells_of(table): f_o per row of
-- a table of predictions and output; pp_reg_cells: per scored row. pp_label_free_f: f = the mean over
-- outputs of f_o, from each row's list (no cell per output grouped back by row), a table: the bin
-- lookup is most of the plan's cost after the draw, and the design's two passes, and regression.py's
-- pass for pp_f_zero when a bin's MAE is 0, read it. pp_label_free: u = f, or 1 on every row when f
-- is 0 everywhere (pp_f_zero, decided by regression.py after this file: from pp_maes, or from that
-- pass). pp_cells: per row of pp_focus (the labelled plan rows' predictions) and output (term = the
-- output's name, pp_outputs), f_o. pp_cell_totals: per output, the sum of f_o over every scored row,
-- with two outputs or more; with one, its total is the design pass's sum of f (regression.py names
-- the output as the LabelFreeModel's f_target) and the view is empty, so no second lookup pass.
CREATE OR REPLACE TEMP MACRO pp_reg_f(y_hat, o) AS
    CASE WHEN getvariable('pp_reference')
         THEN getvariable('pp_maes')[o][list_count(list_filter(getvariable('pp_edges')[o], lambda x: y_hat > x)) + 1]
         ELSE 0.0 END;

CREATE OR REPLACE TEMP MACRO pp_reg_cells_of(source) AS TABLE
WITH per_output AS (
    SELECT row_index, unnest(range(len(prediction))) AS output_id, unnest(prediction) AS prediction
    FROM (SELECT row_index, {prediction} AS prediction FROM query_table(source))
)
SELECT row_index, output_id, pp_reg_f(prediction, output_id + 1) AS f
FROM per_output;

CREATE OR REPLACE TEMP VIEW pp_reg_cells AS SELECT * FROM pp_reg_cells_of('predictions');

CREATE OR REPLACE TEMP TABLE pp_label_free_f AS
SELECT row_index, list_avg(list_transform(prediction, lambda p, i: pp_reg_f(p, i))) AS f
FROM (SELECT row_index, {prediction} AS prediction FROM predictions)
WHERE len(prediction) > 0;

CREATE OR REPLACE TEMP VIEW pp_label_free AS
SELECT row_index, f, CASE WHEN getvariable('pp_f_zero') THEN 1.0 ELSE f END AS u FROM pp_label_free_f;

CREATE OR REPLACE TEMP VIEW pp_cells AS
SELECT row_index, 'mae' AS metric, (getvariable('pp_outputs')::VARCHAR[])[output_id + 1] AS term, f FROM pp_reg_cells_of('pp_focus');

CREATE OR REPLACE TEMP VIEW pp_cell_totals AS
SELECT 'mae' AS metric, (getvariable('pp_outputs')::VARCHAR[])[output_id + 1] AS term, sum(f) AS f FROM pp_reg_cells
WHERE len(getvariable('pp_outputs')) > 1 GROUP BY output_id;
