-- One row per row with both a prediction and a ground-truth label.
-- A label is a model label when it equals one of its names, or is an integer id in range.
CREATE TEMP TABLE resolved_truth AS
SELECT t.row_index, t.raw_label,
       COALESCE(by_name.label_id, by_id.label_id) AS true_id
FROM truth AS t
LEFT JOIN labels AS by_name ON by_name.label_name = t.raw_label
LEFT JOIN labels AS by_id ON by_name.label_id IS NULL
    AND regexp_full_match(t.raw_label, '-?[0-9]+') AND by_id.label_id = TRY_CAST(t.raw_label AS BIGINT);

CREATE TEMP TABLE evaluated AS
SELECT p.row_index,
       r.true_id,
       COALESCE(l.label_name, r.raw_label) AS true_name,
       p.predicted_id,
       p.predicted_label AS pred_name,
       p.score,
       CASE WHEN r.true_id IS NULL THEN NULL ELSE p.probabilities[r.true_id + 1] END AS p_true,
       (r.true_id IS NOT NULL AND r.true_id = p.predicted_id) AS correct
FROM predictions AS p
JOIN resolved_truth AS r ON r.row_index = p.row_index
LEFT JOIN labels AS l ON l.label_id = r.true_id;
