-- reads: nothing
-- creates: truth
-- The truth of a run without ground truth: the table `truth` with no row, its value column {column}
-- as the kind reads it (truth.py).
CREATE TEMP TABLE truth (row_index BIGINT, id VARCHAR, {column});
