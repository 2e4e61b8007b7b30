-- reads: reg_cells
-- creates: nothing
-- The rows with the largest absolute errors per output of `reg_cells` (ties by row_index), with an
-- excerpt of the row's text where the input has one. Errors are ordered by the halves of prediction
-- and truth (the same order, and no overflow near the largest doubles). The $limit largest per output
-- are kept in one pass (max_by's top n by error, then the smaller row_index: -row_index the larger),
-- and only they are joined back for their text: a window over every row sorts all of them, text too
-- (8 CPU s at 3M rows, against under 1).
WITH top AS (
    SELECT output_id, unnest(max_by(struct_pack(row_index, error), struct_pack(error, after := -row_index), $limit)) AS kept
    FROM (SELECT output_id, row_index, abs(prediction * 0.5 - truth * 0.5) AS error FROM reg_cells)
    GROUP BY output_id
)
SELECT c.output_id, c.row_index, c.id, left(c.text, $chars) AS text, c.truth, c.prediction
FROM top JOIN reg_cells AS c ON c.output_id = top.output_id AND c.row_index = top.kept.row_index
ORDER BY c.output_id, top.kept.error DESC, c.row_index;
