-- reads: reg_status, pp_planned
-- creates: pp_labelled, pp_targets
-- A regression run's per-row targets Y of its prediction-powered mae (docs/labelling.md): per
-- evaluated row (every output's truth and prediction finite) and output (term = the output's
-- name, pp_outputs), the absolute error |truth - prediction|.
-- pp_labelled: every evaluated row; pp_targets: only the plan's (pp_planned).
CREATE OR REPLACE TEMP VIEW pp_labelled AS SELECT row_index FROM reg_status WHERE status = 'evaluated';

CREATE OR REPLACE TEMP TABLE pp_targets AS
WITH cells AS (
    SELECT row_index, unnest(range(len(prediction))) AS output_id, unnest(prediction) AS prediction, unnest(truth) AS truth
    FROM reg_status
    WHERE status = 'evaluated' AND row_index IN (SELECT row_index FROM pp_planned)
)
SELECT row_index, 'mae' AS metric, (getvariable('pp_outputs')::VARCHAR[])[output_id + 1] AS term, abs(truth - prediction) AS y FROM cells;
