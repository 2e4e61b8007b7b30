-- reads: <label_totals>
-- creates: pp_cell_totals
-- A multi-label run's pp_cell_totals (docs/labelling.md): macro_f1's TP, FP and FN per label and
-- micro_f1's (each summed over the labels), each the sum of its f over every scored row, from
-- {label_totals} (label_id, tp, fp, fn): the estimate's estimate_totals when it was made against the
-- plan's reference (the same q per row and label), else pp_label_totals (a pass of its own). Subset
-- accuracy's total is the design's (its f is pp_label_free's).
CREATE OR REPLACE TEMP VIEW pp_cell_totals AS
WITH per_label AS (
    SELECT (getvariable('pp_names')::VARCHAR[])[label_id + 1] AS name, tp, fp, fn FROM {label_totals}
)
SELECT 'macro_f1' AS metric, unnest(['TP:' || name, 'FP:' || name, 'FN:' || name]) AS term, unnest([tp, fp, fn]) AS f FROM per_label
UNION ALL
SELECT 'micro_f1', unnest(['TP', 'FP', 'FN']), unnest([sum(tp), sum(fp), sum(fn)]) FROM per_label;
