-- reads: reference_staged, reference_predictions
-- creates: nothing
-- The reference's staged rows and predictions that share a row_index, and its predictions: equal
-- when its staged input (not sealed by its completion record) still holds the rows it scored.
SELECT (SELECT count(*) FROM reference_staged AS s SEMI JOIN reference_predictions AS p ON p.row_index = s.row_index),
       (SELECT count(*) FROM reference_predictions);
