-- reads: nothing
-- creates: pp_labelled, pp_targets
-- The prediction-powered targets of a run without ground truth (docs/labelling.md): pp_labelled (the
-- rows with ground truth) and pp_targets (row_index, metric, term, y), both without a row.
CREATE OR REPLACE TEMP TABLE pp_labelled (row_index BIGINT);

CREATE OR REPLACE TEMP TABLE pp_targets (row_index BIGINT, metric VARCHAR, term VARCHAR, y DOUBLE);
