-- reads: predictions
-- creates: pp_focus
-- Before a labelling plan is drawn (docs/labelling.md): pp_focus, the predictions of the rows whose
-- cells the estimator reads (the head kind's pp_cells is a view over it), empty until the labelled
-- plan rows are known (plan_sample.sql).
CREATE OR REPLACE TEMP TABLE pp_focus AS SELECT * FROM predictions LIMIT 0;
