-- reads: reg_status
-- creates: head_slice_rows
-- A regression run's evaluated rows as the slice breakdown reads them (heads_slice_groups.sql):
-- num = the row's absolute error averaged over its outputs, den = 1. Every evaluated row has every
-- output, so a slice's sum(num) / sum(den) is the mean of its outputs' MAE: the rule of the
-- top-level mae with several outputs (the uniform average of the outputs'). The error is taken from
-- the halves of prediction and truth, so that it overflows only where its value does. Each row's
-- lists are read where they are (reg_status: one row per scored row), not grouped back from
-- reg_cells: a group per row is a hash table of every evaluated row, which at 3M rows ran out of
-- the connection's memory limit (duck.py's 192MB).
CREATE OR REPLACE TEMP TABLE head_slice_rows AS
SELECT row_index, list_avg(list_transform(prediction, lambda p, i: abs(p * 0.5 - truth[i] * 0.5))) * 2 AS num,
       1.0::DOUBLE AS den, NULL::BOOLEAN AS exact
FROM reg_status
WHERE status = 'evaluated';
