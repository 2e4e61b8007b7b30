-- reads: <label_totals>
-- creates: pp_cell_totals
-- A single-label run's pp_cell_totals (docs/labelling.md): macro_f1's TP, FP and FN per label, each
-- the sum of its f over every scored row, from {label_totals} (label_id, tp, fp, fn): the estimate's
-- estimate_totals when it was made against the plan's reference (the same q per row and label), else
-- pp_label_totals (a pass of its own). Accuracy's total is the design's (its f is pp_label_free's).
CREATE OR REPLACE TEMP VIEW pp_cell_totals AS
SELECT 'macro_f1' AS metric, unnest(['TP:' || name, 'FP:' || name, 'FN:' || name]) AS term, unnest([tp, fp, fn]) AS f
FROM (SELECT (getvariable('pp_names')::VARCHAR[])[label_id + 1] AS name, tp, fp, fn FROM {label_totals});
