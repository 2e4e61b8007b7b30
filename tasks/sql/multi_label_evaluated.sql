-- Multi-label rows with both a prediction and ground truth, one row per (row, label) cell.
-- A ground-truth name is a model label when it equals one of its names, or is an integer id in
-- range (as single-label truth is resolved); other names are unknown: counted, not evaluated.
-- Expects: truth (row_index, id, value VARCHAR[]), predictions (row_index, id, predicted_labels,
-- probabilities), labels (label_id, label_name).
CREATE TEMP TABLE ml_truth_names AS
SELECT t.row_index, t.raw, COALESCE(by_name.label_id, by_id.label_id) AS label_id
FROM (SELECT row_index, unnest(value) AS raw FROM truth WHERE row_index IS NOT NULL) AS t
LEFT JOIN labels AS by_name ON by_name.label_name = t.raw
LEFT JOIN labels AS by_id ON by_name.label_id IS NULL
    AND regexp_full_match(t.raw, '-?[0-9]+') AND by_id.label_id = TRY_CAST(t.raw AS BIGINT);

-- one row per evaluated row
CREATE TEMP TABLE ml_evaluated AS
SELECT p.row_index, p.id, p.predicted_labels, p.probabilities
FROM predictions AS p
JOIN truth AS t ON t.row_index = p.row_index;

-- one row per evaluated row and model label: y (in the truth), p (probability), predicted
CREATE TEMP TABLE ml_cells AS
SELECT e.row_index, l.label_id, l.label_name,
       (hit.row_index IS NOT NULL) AS y,
       e.probabilities[l.label_id + 1] AS p,
       list_contains(e.predicted_labels, l.label_name) AS predicted
FROM ml_evaluated AS e
CROSS JOIN labels AS l
LEFT JOIN (SELECT DISTINCT row_index, label_id FROM ml_truth_names WHERE label_id IS NOT NULL) AS hit
    ON hit.row_index = e.row_index AND hit.label_id = l.label_id;
