-- A multi-label run's rows for tasks/heads_metrics.py: `ml_rows` (row_index, id as text,
-- probabilities, truth BOOLEAN[] in model label order or NULL without ground truth, text), one
-- row per scored row. A ground-truth name is a model label when it equals one of its names, or is
-- an integer id in range (as single-label truth is resolved); other names are unknown: counted in
-- `ml_truth_names`, the row evaluated on the labels the model has.
-- Expects: truth (row_index, id, value VARCHAR[]), predictions, staged, labels (label_id, label_name).
CREATE TEMP TABLE ml_truth_names AS
SELECT t.row_index, t.raw, COALESCE(by_name.label_id, by_id.label_id) AS label_id
FROM (SELECT row_index, unnest(value) AS raw FROM truth WHERE row_index IS NOT NULL) AS t
LEFT JOIN labels AS by_name ON by_name.label_name = t.raw
LEFT JOIN labels AS by_id ON by_name.label_id IS NULL
    AND regexp_full_match(t.raw, '-?[0-9]+') AND by_id.label_id = TRY_CAST(t.raw AS BIGINT);

CREATE TEMP TABLE ml_truth_vectors AS
WITH hits AS (SELECT DISTINCT row_index, label_id FROM ml_truth_names WHERE label_id IS NOT NULL)
SELECT t.row_index, list(h.row_index IS NOT NULL ORDER BY l.label_id) AS truth
FROM truth AS t
CROSS JOIN labels AS l
LEFT JOIN hits AS h ON h.row_index = t.row_index AND h.label_id = l.label_id
WHERE t.row_index IS NOT NULL
GROUP BY t.row_index;

CREATE TEMP TABLE ml_rows AS
SELECT p.row_index, p.id::VARCHAR AS id, p.probabilities, v.truth, s.text
FROM predictions AS p
LEFT JOIN ml_truth_vectors AS v ON v.row_index = p.row_index
LEFT JOIN staged AS s ON s.row_index = p.row_index;
