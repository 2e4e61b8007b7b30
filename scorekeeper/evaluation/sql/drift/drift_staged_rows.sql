-- reads: reference_staged, reference_predictions
-- creates: nothing
-- The rows at which the reference's staged input and its predictions hold different row_indexes,
-- read side by side (both are written in row_index order; the shorter is padded with nulls): none
-- when its staged input (not sealed by its completion record) still holds the rows it scored.
SELECT count(*) FILTER (WHERE s.row_index IS DISTINCT FROM p.row_index)
FROM (SELECT row_index FROM reference_staged) AS s
POSITIONAL JOIN (SELECT row_index FROM reference_predictions) AS p;
