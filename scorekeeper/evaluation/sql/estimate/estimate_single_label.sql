-- reads: predictions
-- creates: nothing
-- Expected TP, FP and FN per label of a single-label run from the reference's calibration
-- ($rows[k][b], $truth[k][b]: its evaluated rows in bin b of label k's probability, and those of
-- truth k): a row's q_k = (truth + p_k) / (rows + 1) at its bin of p_k, renormalised over the row's
-- labels; TP_k = sum of q_k over rows predicted k, FP_k = sum of 1 - q_k there, FN_k = sum of q_k elsewhere.
WITH calibrated AS (
    SELECT predicted_id,
           list_transform(probabilities, lambda p, i:
               ($truth[i][least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) + 1] + p)
               / ($rows[i][least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) + 1] + 1)) AS q
    FROM predictions
), cells AS (
    SELECT predicted_id, unnest(range(len(q))) AS label_id, unnest(list_transform(q, lambda x: x / list_sum(q))) AS q
    FROM calibrated
)
SELECT label_id,
       coalesce(sum(q) FILTER (WHERE label_id = predicted_id), 0) AS tp,
       coalesce(sum(1 - q) FILTER (WHERE label_id = predicted_id), 0) AS fp,
       coalesce(sum(q) FILTER (WHERE label_id <> predicted_id), 0) AS fn
FROM cells
GROUP BY label_id
ORDER BY label_id;
