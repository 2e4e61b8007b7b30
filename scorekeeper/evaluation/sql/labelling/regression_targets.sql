-- reads: reg_status
-- creates: pp_targets
-- A regression run's per-row targets Y of its prediction-powered mae (docs/labelling.md): per
-- evaluated row (every output's truth and prediction finite) and output (term = the output's
-- name, pp_outputs), the absolute error |truth - prediction|.
CREATE OR REPLACE TEMP TABLE pp_targets AS
WITH cells AS (
    SELECT row_index, unnest(range(len(prediction))) AS output_id, unnest(prediction) AS prediction, unnest(truth) AS truth
    FROM reg_status
    WHERE status = 'evaluated'
)
SELECT row_index, 'mae' AS metric, (getvariable('pp_outputs')::VARCHAR[])[output_id + 1] AS term, abs(truth - prediction) AS y FROM cells;
