-- reads: predictions, truth, staged
-- creates: reg_rows
-- A regression run's rows for scorekeeper/evaluation/regression.py: `reg_rows` (row_index, id as text,
-- prediction, truth (NULL without ground truth), text), one row per scored row; a number each, or
-- lists in output order when the head has several outputs.
-- Expects: truth (row_index, id, value), predictions, staged.
CREATE TEMP TABLE reg_rows AS
SELECT p.row_index, p.id::VARCHAR AS id, p.prediction, t.value AS truth, s.text
FROM predictions AS p
LEFT JOIN truth AS t ON t.row_index = p.row_index
LEFT JOIN staged AS s ON s.row_index = p.row_index;
