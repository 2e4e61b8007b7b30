-- reads: estimate_cells
-- creates: estimate_totals
-- Expected TP, FP and FN per label: TP_k = sum of q_k over rows predicted k, FP_k = sum of 1 - q_k
-- there, FN_k = sum of q_k elsewhere. estimate_totals (label_id, tp, fp, fn), a table: a labelling
-- plan drawn against the same reference reads its label-free totals from it (docs/labelling.md).
CREATE OR REPLACE TEMP TABLE estimate_totals AS
SELECT label_id,
       coalesce(sum(q) FILTER (WHERE predicted), 0) AS tp,
       coalesce(sum(1 - q) FILTER (WHERE predicted), 0) AS fp,
       coalesce(sum(q) FILTER (WHERE NOT predicted), 0) AS fn
FROM estimate_cells
GROUP BY label_id;
