-- reads: predictions, pp_focus
-- creates: pp_reg_cells_of, pp_reg_cells, pp_label_free, pp_cells, pp_cell_totals
-- A regression run's label-free predictions for its labelling plan and prediction-powered mae
-- (docs/labelling.md): per output o, f_o = the reference's MAE in the row's bin of the prediction
-- (pp_edges[o]: the reference's residual_bins edges, bin = the edges strictly below the prediction;
-- pp_maes[o]: each bin's MAE, an empty bin's the output's overall) with a reference (pp_reference true),
-- else 0. {prediction} is the predictions' prediction column as a list (one element per output).
-- The table macro pp_reg_cells_of(table): f_o per row of a table of predictions and output;
-- pp_reg_cells: per scored row. pp_label_free: f = the mean over outputs of f_o, u = f (1 on every
-- row when f is 0 everywhere). pp_cells: per row of pp_focus (the labelled plan rows' predictions)
-- and output (term = the output's name, pp_outputs), f_o. pp_cell_totals: per output, the sum of f_o
-- over every scored row.
CREATE OR REPLACE TEMP MACRO pp_reg_cells_of(source) AS TABLE
WITH per_output AS (
    SELECT row_index, unnest(range(len(prediction))) AS output_id, unnest(prediction) AS prediction
    FROM (SELECT row_index, {prediction} AS prediction FROM query_table(source))
)
SELECT row_index, output_id,
       CASE WHEN getvariable('pp_reference')
            THEN getvariable('pp_maes')[output_id + 1][list_count(list_filter(getvariable('pp_edges')[output_id + 1], lambda x: prediction > x)) + 1]
            ELSE 0.0 END AS f
FROM per_output;

CREATE OR REPLACE TEMP VIEW pp_reg_cells AS SELECT * FROM pp_reg_cells_of('predictions');

CREATE OR REPLACE TEMP VIEW pp_label_free AS
WITH per_row AS (SELECT row_index, avg(f) AS f FROM pp_reg_cells GROUP BY row_index)
SELECT row_index, f, CASE WHEN max(f) OVER () = 0 THEN 1.0 ELSE f END AS u FROM per_row;

CREATE OR REPLACE TEMP VIEW pp_cells AS
SELECT row_index, 'mae' AS metric, (getvariable('pp_outputs')::VARCHAR[])[output_id + 1] AS term, f FROM pp_reg_cells_of('pp_focus');

CREATE OR REPLACE TEMP VIEW pp_cell_totals AS
SELECT 'mae' AS metric, (getvariable('pp_outputs')::VARCHAR[])[output_id + 1] AS term, sum(f) AS f FROM pp_reg_cells GROUP BY output_id;
