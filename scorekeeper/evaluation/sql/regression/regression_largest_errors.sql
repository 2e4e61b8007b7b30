-- reads: reg_cells
-- creates: nothing
-- The rows with the largest absolute errors per output of `reg_cells` (ties by row_index), with an
-- excerpt of the row's text where the input has one.
SELECT output_id, row_index, id, left(text, $chars) AS text, truth, prediction
FROM reg_cells
QUALIFY row_number() OVER (PARTITION BY output_id ORDER BY abs(prediction - truth) DESC, row_index) <= $limit
ORDER BY output_id, abs(prediction - truth) DESC, row_index;
