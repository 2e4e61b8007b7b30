-- reads: ml_labels, ml_cells
-- creates: ml_label_counts
-- Confusion counts per model label over `ml_cells`, with precision, recall and F1 as scikit-learn
-- defines them on a label indicator matrix (0/0 counts as 0, its zero_division default).
CREATE OR REPLACE TEMP TABLE ml_label_counts AS
WITH counts AS (
    SELECT l.label_id, l.label_name, l.threshold,
           count(c.row_index) AS cells,
           count(*) FILTER (WHERE c.truth AND c.predicted) AS tp,
           count(*) FILTER (WHERE NOT c.truth AND c.predicted) AS fp,
           count(*) FILTER (WHERE c.truth AND NOT c.predicted) AS fn,
           count(*) FILTER (WHERE c.truth) AS support
    FROM ml_labels AS l
    LEFT JOIN ml_cells AS c ON c.label_id = l.label_id
    GROUP BY l.label_id, l.label_name, l.threshold
)
SELECT *,
       coalesce(tp / nullif(tp + fp, 0), 0.0) AS precision,
       coalesce(tp / nullif(tp + fn, 0), 0.0) AS recall,
       coalesce(2 * tp / nullif(2 * tp + fp + fn, 0), 0.0) AS f1
FROM counts;
