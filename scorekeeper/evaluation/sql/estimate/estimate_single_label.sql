-- reads: predictions
-- creates: estimate_cells
-- A single-label run's cells (row, label) for the estimated F1 from the reference's calibration
-- ($rows[k][b], $truth[k][b]: its evaluated rows in bin b of label k's probability, and those of
-- truth k): at the row's bin of p_k, q_raw = (truth + p_k) / (rows + 1), renormalised over the
-- row's labels into q (row_sum: the row's sum of q_raw); predicted: k is the row's predicted label.
CREATE OR REPLACE TEMP TABLE estimate_cells AS
WITH calibrated AS (
    SELECT row_index, predicted_id, probabilities,
           list_transform(probabilities, lambda p, i:
               ($truth[i][least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) + 1] + p)
               / ($rows[i][least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) + 1] + 1)) AS q
    FROM predictions
), cells AS (
    SELECT row_index, predicted_id, list_sum(q) AS row_sum,
           unnest(range(len(q))) AS label_id, unnest(probabilities) AS p, unnest(q) AS q_raw
    FROM calibrated
)
SELECT row_index, label_id, least(CAST(floor(p * $bins) AS INTEGER), $bins - 1) AS bin, p, q_raw, row_sum,
       q_raw / row_sum AS q, label_id = predicted_id AS predicted
FROM cells;
