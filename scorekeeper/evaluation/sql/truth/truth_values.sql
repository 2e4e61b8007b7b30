-- reads: <truth>, <labels>
-- creates: nothing
-- What the ground-truth column's distinct values are against one label list ({labels}: a table of
-- label_id, label_name): how many are label names, how many the integer literal of an id in range,
-- how many are such ids but no label name, and the first values that would mean different labels
-- by name and by id. The column's one rule is decided from this (scorekeeper/evaluation/matching.py).
-- Expects: {truth} (row_index, id, raw_label): `truth`, or a multi-label column's `truth_elements`.
WITH v AS (
    SELECT raw_label, count(*) AS n FROM {truth} GROUP BY raw_label
), r AS (
    SELECT v.raw_label, v.n, by_name.label_id AS name_id, by_id.label_id AS id_id
    FROM v
    LEFT JOIN {labels} AS by_name ON by_name.label_name = v.raw_label
    LEFT JOIN {labels} AS by_id ON regexp_full_match(v.raw_label, '-?[0-9]+') AND by_id.label_id = TRY_CAST(v.raw_label AS BIGINT)
)
SELECT count(*) AS distinct_values,
       count(*) FILTER (WHERE name_id IS NOT NULL) AS names,
       count(*) FILTER (WHERE id_id IS NOT NULL) AS ids,
       count(*) FILTER (WHERE name_id IS NULL AND id_id IS NOT NULL) AS ids_not_names,
       coalesce(list(raw_label ORDER BY n DESC, raw_label) FILTER (WHERE name_id <> id_id), [])[1:5] AS conflicts
FROM r;
