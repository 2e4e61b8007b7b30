-- reads: pp_planned, pp_targets, pp_plan_predictions
-- creates: pp_sample, pp_focus
-- The labelled plan rows (docs/labelling.md): pp_sample, the plan rows with a target (ground truth)
-- and their inclusion probability times the response rate (getvariable('pp_response'): labelled plan
-- rows / plan rows; missing at random within the plan), and pp_focus, their predictions (read from
-- the plan's rows, not the run's again), whose cells the head kind's pp_cells gives.
CREATE OR REPLACE TEMP TABLE pp_sample AS
SELECT d.row_index, d.pi * getvariable('pp_response') AS pi
FROM pp_planned AS d SEMI JOIN pp_targets AS t ON t.row_index = d.row_index;

CREATE OR REPLACE TEMP TABLE pp_focus AS
SELECT p.* FROM pp_plan_predictions AS p SEMI JOIN pp_sample AS s ON s.row_index = p.row_index;
