-- reads: truth, labels, predictions
-- creates: resolved_labels, evaluated
-- One row per row with both a prediction and a ground-truth label, its label resolved by the one
-- rule of the column ({rule}: 'id', 'name' or 'name_or_id', a literal decided once from the
-- column's type and values by scorekeeper/evaluation/matching.py; never chosen row by row).
-- `truth_id` is the value read as a label id (for pairing with another run). An unknown value
-- spelled like a label name (integer truth 3 against a label named "3") gets a name of its own,
-- the value and ' [unknown]' (' [unknown {unknown}]' when a label name ends so: single_label.py), so
-- that it never counts as that label, nor as a label named "3 [unknown]", in the per-class metrics. The row's probabilities are
-- carried along: the ranking metrics and the label audit read them here rather than joining the
-- predictions again (each join of millions of rows builds a hash table larger than the memory limit).
-- The rule is applied once per distinct value (a few, however many rows), then joined to the rows,
-- rather than to each row (two regular expressions per row, and a temp table of every row).
CREATE TEMP TABLE resolved_labels AS
WITH raw AS (
    SELECT DISTINCT raw_label FROM truth WHERE raw_label IS NOT NULL
), resolved AS (
    SELECT t.raw_label,
           CASE WHEN regexp_full_match(t.raw_label, '-?[0-9]+') THEN TRY_CAST(t.raw_label AS BIGINT) END AS truth_id,
           CASE {rule} WHEN 'name' THEN by_name.label_id
                       WHEN 'id' THEN by_id.label_id
                       ELSE coalesce(by_name.label_id, by_id.label_id) END AS true_id
    FROM raw AS t
    LEFT JOIN labels AS by_name ON by_name.label_name = t.raw_label
    LEFT JOIN labels AS by_id ON regexp_full_match(t.raw_label, '-?[0-9]+') AND by_id.label_id = TRY_CAST(t.raw_label AS BIGINT)
)
SELECT r.raw_label, r.truth_id, r.true_id,
       CASE WHEN l.label_name IS NOT NULL THEN l.label_name
            WHEN r.raw_label IN (SELECT label_name FROM labels) THEN r.raw_label || CASE WHEN {unknown} = 1 THEN ' [unknown]' ELSE ' [unknown ' || {unknown} || ']' END
            ELSE r.raw_label END AS true_name
FROM resolved AS r
LEFT JOIN labels AS l ON l.label_id = r.true_id;

CREATE TEMP TABLE evaluated AS
SELECT p.row_index,
       r.true_id,
       t.raw_label,
       r.truth_id,
       r.true_name,
       p.predicted_id,
       p.predicted_label AS pred_name,
       p.score,
       CASE WHEN r.true_id IS NULL THEN NULL ELSE p.probabilities[r.true_id + 1] END AS p_true,
       (r.true_id IS NOT NULL AND r.true_id = p.predicted_id) AS correct,
       p.probabilities
FROM predictions AS p
JOIN truth AS t ON t.row_index = p.row_index
LEFT JOIN resolved_labels AS r ON r.raw_label = t.raw_label;
