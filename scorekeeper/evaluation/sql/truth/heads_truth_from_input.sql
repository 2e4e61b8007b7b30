-- reads: staged
-- creates: truth
-- Ground truth of a multi-label or regression head carried in the input rows, in its staged type
-- (a list of label names, or a number): one row per input row that has ground truth.
-- Expects views: staged (row_index, id, label, ...).
CREATE TEMP TABLE truth AS
SELECT s.row_index, s.id, s.label AS value
FROM staged AS s
WHERE s.label IS NOT NULL;
