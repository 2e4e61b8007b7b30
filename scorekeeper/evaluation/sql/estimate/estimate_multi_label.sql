-- reads: predictions
-- creates: estimate_cells
-- A multi-label run's cells (row, label) for the estimated F1 ($rows, $truth as
-- estimate_single_label.sql; truth: the label is among the row's true labels): q = q_raw =
-- (truth + p_k) / (rows + 1) at the row's bin of p_k, not renormalised (row_sum 1); predicted: the
-- label is in the row's predicted_labels ($names: the labels in model order).
CREATE OR REPLACE TEMP TABLE estimate_cells AS
WITH cells AS (
    SELECT row_index, predicted_labels, unnest(range(len(probabilities))) AS label_id, unnest(probabilities) AS p
    FROM predictions
), binned AS (
    SELECT *, least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) AS bin FROM cells
)
SELECT row_index, label_id, bin, p,
       ($truth[label_id + 1][bin + 1] + p) / ($rows[label_id + 1][bin + 1] + 1) AS q_raw, 1.0::DOUBLE AS row_sum,
       ($truth[label_id + 1][bin + 1] + p) / ($rows[label_id + 1][bin + 1] + 1) AS q,
       list_contains(predicted_labels, ($names::VARCHAR[])[label_id + 1]) AS predicted
FROM binned;
