-- reads: evaluated, labels
-- creates: audit_thresholds, audit_suspected
-- Confident learning (Northcutt, Jiang & Chuang, JAIR 2021) over the evaluated rows whose label the
-- model knows. The threshold of class k is the mean probability of k over the rows labelled k. A
-- row is a suspected label error when at least one class reaches its threshold and the most
-- probable of those classes (ties: the lowest label id, as numpy's argmax) is not the given label:
-- the off-diagonal of the confident joint. margin = p(suggested) - p(given).
CREATE OR REPLACE TEMP TABLE audit_thresholds AS
SELECT true_id AS label_id, avg(probabilities[true_id + 1]) AS threshold
FROM evaluated
WHERE true_id IS NOT NULL
GROUP BY true_id;

-- One pass over the rows with list functions, no aggregation by row: `reached` keeps each class's
-- probability where it reaches the class's threshold (NULL elsewhere, and for classes no row is
-- labelled with, which have no threshold); the suggestion is its largest value, the first such
-- position on ties. Grouping the unnested (row, class) pairs by row did the same with a hash table
-- of every row, which spilled past the memory limit and grew faster than the rows (2.1 s at 3M
-- rows, 10.3 s at 10M).
CREATE OR REPLACE TEMP TABLE audit_suspected AS
WITH thresholds AS (
    SELECT list(t.threshold ORDER BY l.label_id) AS by_label
    FROM labels AS l
    LEFT JOIN audit_thresholds AS t ON t.label_id = l.label_id
), reached AS (
    SELECT e.row_index, e.true_id, e.probabilities[e.true_id + 1] AS p_given,
           list_transform(e.probabilities, lambda p, k: CASE WHEN p >= t.by_label[k] THEN p END) AS reached
    FROM evaluated AS e, thresholds AS t
    WHERE e.true_id IS NOT NULL
), confident AS (
    SELECT row_index, true_id, p_given, list_max(reached) AS p_suggested,
           list_position(reached, list_max(reached)) - 1 AS suggested_id
    FROM reached
)
SELECT row_index, true_id, suggested_id, p_suggested - p_given AS margin
FROM confident
WHERE p_suggested IS NOT NULL AND suggested_id <> true_id;
