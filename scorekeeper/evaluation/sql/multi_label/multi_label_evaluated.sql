-- reads: truth_elements, labels, truth, predictions, staged
-- creates: ml_truth_names, ml_truth_vectors, ml_rows
-- A multi-label run's rows for scorekeeper/evaluation/multi_label.py: `ml_rows` (row_index, id as text,
-- probabilities, truth BOOLEAN[] in model label order or NULL without ground truth, text), one
-- row per scored row. Each list element is resolved by the one rule of the column ({rule}: 'id',
-- 'name' or 'name_or_id', a literal decided once from the elements' type and values by
-- scorekeeper/evaluation/matching.py, as for a single-label column; never chosen element by element);
-- other elements are unknown: counted in `ml_truth_names`, the row evaluated on the labels the
-- model has.
-- Expects: truth (row_index, id, value), truth_elements (row_index, id, raw_label), predictions,
-- staged, labels (label_id, label_name).
CREATE TEMP TABLE ml_truth_names AS
SELECT t.row_index, t.raw_label AS raw,
       CASE {rule} WHEN 'name' THEN by_name.label_id
                   WHEN 'id' THEN by_id.label_id
                   ELSE coalesce(by_name.label_id, by_id.label_id) END AS label_id
FROM truth_elements AS t
LEFT JOIN labels AS by_name ON by_name.label_name = t.raw_label
LEFT JOIN labels AS by_id ON regexp_full_match(t.raw_label, '-?[0-9]+') AND by_id.label_id = TRY_CAST(t.raw_label AS BIGINT);

-- Each truth row's vector from its own hits (truth holds one row per row_index: the read step refuses
-- duplicate ids), not a cross join of every row with every label grouped back by row (4x the time at 3M rows).
CREATE TEMP TABLE ml_truth_vectors AS
WITH hits AS (
    SELECT row_index, list(DISTINCT label_id) AS ids FROM ml_truth_names WHERE label_id IS NOT NULL GROUP BY row_index
), label_ids AS (
    SELECT list(label_id ORDER BY label_id) AS ids FROM labels
)
SELECT t.row_index, list_transform(l.ids, lambda k: coalesce(list_contains(h.ids, k), false)) AS truth
FROM truth AS t
CROSS JOIN label_ids AS l
LEFT JOIN hits AS h ON h.row_index = t.row_index
WHERE t.row_index IS NOT NULL;

CREATE TEMP TABLE ml_rows AS
SELECT p.row_index, p.id::VARCHAR AS id, p.probabilities, v.truth, s.text
FROM predictions AS p
LEFT JOIN ml_truth_vectors AS v ON v.row_index = p.row_index
LEFT JOIN staged AS s ON s.row_index = p.row_index;
