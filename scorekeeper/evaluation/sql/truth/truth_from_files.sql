-- reads: ground_truth, staged
-- creates: truth
-- Ground truth in separate files, joined to the input rows on the id, for every kind of head. When
-- the two sides' id types differ (integer vs text) both are compared as text: 7 matches '7', not
-- '007'. Expects views: staged (row_index, id), ground_truth (id, label). Macros: {id_cast} is ''
-- or '::VARCHAR'; {value} the truth's column as the kind reads it (truth.py: a single-label head's
-- `raw_label`, its text; the others' `value`, in its staged type), over `src.label`.
CREATE TEMP TABLE truth AS
SELECT s.row_index, src.id{id_cast} AS id, {value}
FROM ground_truth AS src
LEFT JOIN staged AS s ON s.id{id_cast} = src.id{id_cast}
WHERE src.label IS NOT NULL;
