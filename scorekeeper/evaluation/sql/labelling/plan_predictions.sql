-- reads: nothing
-- creates: pp_plan_predictions
-- The plan's rows' predictions (docs/labelling.md), read back from the plan file the labelling just
-- wrote (getvariable('pp_plan_copy'): plan_rows.sql's rows) rather than from the run's predictions
-- again: every column but the staged text column(s) and the design's ({plan_only}). The labelled
-- ones among them are the estimator's pp_focus (plan_sample.sql).
CREATE OR REPLACE TEMP TABLE pp_plan_predictions AS
SELECT * EXCLUDE ({plan_only}) FROM read_parquet(getvariable('pp_plan_copy'));
