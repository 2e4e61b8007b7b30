-- reads: reg_cells
-- creates: nothing
-- The rows with the largest absolute errors per output of `reg_cells` (ties by row_index), with an
-- excerpt of the row's text where the input has one. Errors are ordered by the halves of prediction
-- and truth (the same order, and no overflow near the largest doubles).
SELECT output_id, row_index, id, left(text, $chars) AS text, truth, prediction
FROM reg_cells
QUALIFY row_number() OVER (PARTITION BY output_id ORDER BY abs(prediction * 0.5 - truth * 0.5) DESC, row_index) <= $limit
ORDER BY output_id, abs(prediction * 0.5 - truth * 0.5) DESC, row_index;
