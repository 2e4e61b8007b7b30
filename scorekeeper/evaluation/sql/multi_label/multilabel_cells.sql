-- reads: ml_rows, ml_labels
-- creates: ml_cells
-- One row per (evaluated row, model label) of a multi-label run, from `ml_rows` and `ml_labels`
-- (scorekeeper/evaluation/multi_label.py documents both). Rows whose truth is null have no ground truth and are
-- not evaluated; an empty truth (every element false) is a row with no label. A label is predicted
-- when its probability is strictly above its threshold. `tuning` splits the rows into two halves
-- for threshold tuning: the first hex digit of md5 of the id's text is 0-7 (tuning) or 8-f
-- (held out), so anyone can reproduce the split with hashlib.
CREATE OR REPLACE TEMP TABLE ml_cells AS
WITH cells AS (
    SELECT row_index, id,
           unnest(range(len(probabilities))) AS label_id,
           unnest(probabilities) AS prob,
           unnest(truth) AS truth
    FROM ml_rows
    WHERE truth IS NOT NULL
)
SELECT c.row_index, c.id, c.label_id, c.prob, c.truth,
       c.prob > l.threshold AS predicted,
       left(md5(c.id), 1) < '8' AS tuning
FROM cells AS c
JOIN ml_labels AS l ON l.label_id = c.label_id;
