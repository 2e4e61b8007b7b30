-- reads: predictions
-- creates: nothing
-- Expected TP, FP and FN per label of a multi-label run from the reference's calibration ($rows,
-- $truth as estimate_single_label.sql; truth: the label is among the row's true labels): q_k =
-- (truth + p_k) / (rows + 1) at the row's bin of p_k, not renormalised; a label is predicted when
-- it is in the row's predicted_labels ($names: the labels in model order).
WITH cells AS (
    SELECT predicted_labels,
           unnest(range(len(probabilities))) AS label_id,
           unnest(list_transform(probabilities, lambda p, i:
               ($truth[i][least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) + 1] + p)
               / ($rows[i][least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) + 1] + 1))) AS q
    FROM predictions
), marked AS (
    SELECT label_id, q, list_contains(predicted_labels, ($names::VARCHAR[])[label_id + 1]) AS predicted FROM cells
)
SELECT label_id,
       coalesce(sum(q) FILTER (WHERE predicted), 0) AS tp,
       coalesce(sum(1 - q) FILTER (WHERE predicted), 0) AS fp,
       coalesce(sum(q) FILTER (WHERE NOT predicted), 0) AS fn
FROM marked
GROUP BY label_id
ORDER BY label_id;
