-- reads: staged
-- creates: truth
-- Ground truth carried in the input rows, for every kind of head: one row per input row that has a
-- label. Expects views: staged (row_index, id, label, ...). Macro: {value} the truth's column as
-- the kind reads it (truth.py: a single-label head's `raw_label`, its text; the others' `value`, in
-- its staged type: a list of label names, or a number), over `src.label`.
CREATE TEMP TABLE truth AS
SELECT src.row_index, src.id, {value}
FROM staged AS src
WHERE src.label IS NOT NULL;
