-- reads: staged
-- creates: truth
-- Ground truth carried in the input rows: one row per input row that has a label.
-- Expects views: staged (row_index, id, label, ...), labels (label_id, label_name).
CREATE TEMP TABLE truth AS
SELECT s.row_index, s.id, CAST(s.label AS VARCHAR) AS raw_label
FROM staged AS s
WHERE s.label IS NOT NULL;
