-- reads: pp_planned, predictions, staged
-- creates: pp_plan_rows
-- report/label_plan.parquet's rows (docs/labelling.md), a view the labelling copies to the file in
-- row_index order: the plan's rows with row_index, id, the staged text column(s) ({texts}), every
-- other prediction column, and the design's inclusion_probability (pi), uncertainty (u) and
-- label_free (f) (pp_planned holds them). Each of the run's files is semi-joined to the plan's rows
-- first (a join of the three builds a table of every staged row). The copy is the one pass over the
-- predictions for the plan's rows: the estimator reads the labelled ones' predictions back from the
-- file (plan_predictions.sql).
CREATE OR REPLACE TEMP VIEW pp_plan_rows AS
WITH p AS (
    SELECT * FROM predictions SEMI JOIN pp_planned USING (row_index)
), s AS (
    SELECT * FROM staged SEMI JOIN pp_planned USING (row_index)
)
SELECT p.row_index, p.id, {texts}, p.* EXCLUDE (row_index, id),
       l.pi AS inclusion_probability, l.u AS uncertainty, l.f AS label_free
FROM pp_planned AS l
JOIN p ON p.row_index = l.row_index
JOIN s ON s.row_index = l.row_index;
