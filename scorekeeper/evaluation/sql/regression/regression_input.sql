-- reads: reg_rows
-- creates: reg_input
-- reg_rows with prediction and truth as lists ({prediction}, {truth}: a scalar column wrapped) and
-- a text column ({text}).
CREATE OR REPLACE TEMP VIEW reg_input AS
SELECT row_index, id::VARCHAR AS id, {text} AS text, {prediction} AS prediction, {truth} AS truth
FROM reg_rows;
