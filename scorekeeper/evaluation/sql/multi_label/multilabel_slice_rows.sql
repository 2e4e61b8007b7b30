-- reads: ml_cells
-- creates: head_slice_rows
-- A multi-label run's evaluated rows as the slice breakdown reads them (heads_slice_groups.sql):
-- num = 2 TP and den = 2 TP + FP + FN of the row's labels, so a slice's micro-F1 is
-- sum(num) / sum(den) (0 when that is 0/0: scikit-learn's zero_division, as multilabel_metrics.sql),
-- and exact: every label of the row right (subset accuracy).
CREATE OR REPLACE TEMP TABLE head_slice_rows AS
SELECT row_index,
       (2 * count(*) FILTER (WHERE truth AND predicted))::DOUBLE AS num,
       (count(*) FILTER (WHERE truth AND predicted) + count(*) FILTER (WHERE truth OR predicted))::DOUBLE AS den,
       bool_and(truth = predicted) AS exact
FROM ml_cells
GROUP BY row_index;
