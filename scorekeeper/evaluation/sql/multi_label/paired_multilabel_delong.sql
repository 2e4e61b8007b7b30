-- reads: ml_paired_cells, ml_paired_ovr_after, ml_paired_ovr_before
-- creates: nothing
-- DeLong's paired test of the multi-label ROC-AUC change by row influence (scorekeeper/evaluation/statistics/paired_blocks.py):
-- over ml_paired_cells and the one-vs-rest tables of both runs (ml_paired_ovr_after, _before; label
-- -1 pools every cell: the micro AUC). A positive cell's placement is the share of negatives it
-- outscores, a negative's the share of positives that outscore it (ties one half); AUC = the mean
-- placement of the positives. Only labels with positives and negatives take part. Returned, one
-- row: the macro delta (mean over those labels of AUC this - AUC other) and the sum over rows of
-- the squared row influence (its cells' influences averaged over those labels), then the same for micro.
WITH cells AS (
    SELECT row_index, label_id, truth, prob_after, prob_before FROM ml_paired_cells
    UNION ALL
    SELECT row_index, -1, truth, prob_after, prob_before FROM ml_paired_cells
), placed AS (
    SELECT c.row_index, c.label_id, c.truth,
           CASE WHEN c.truth THEN (a.negatives - a.fp + a.neg / 2.0) / a.negatives ELSE (a.tp - a.pos / 2.0) / a.positives END AS v_after,
           CASE WHEN c.truth THEN (b.negatives - b.fp + b.neg / 2.0) / b.negatives ELSE (b.tp - b.pos / 2.0) / b.positives END AS v_before,
           CASE WHEN c.truth THEN a.positives ELSE a.negatives END AS g
    FROM cells AS c
    JOIN ml_paired_ovr_after AS a ON a.label_id = c.label_id AND a.score = c.prob_after
    JOIN ml_paired_ovr_before AS b ON b.label_id = c.label_id AND b.score = c.prob_before
    WHERE a.positives > 0 AND a.negatives > 0
), auc AS (
    SELECT label_id, avg(v_after) FILTER (WHERE truth) AS auc_after, avg(v_before) FILTER (WHERE truth) AS auc_before
    FROM placed
    GROUP BY label_id
), influence AS (
    SELECT p.row_index, p.label_id,
           ((p.v_after - u.auc_after) - (p.v_before - u.auc_before)) / p.g * CASE WHEN p.g > 1 THEN sqrt(p.g / (p.g - 1.0)) ELSE 1.0 END AS psi
    FROM placed AS p
    JOIN auc AS u ON u.label_id = p.label_id
), per_row AS (
    SELECT row_index,
           coalesce(sum(psi) FILTER (WHERE label_id >= 0), 0.0) / (SELECT nullif(count(*), 0) FROM auc WHERE label_id >= 0) AS macro,
           coalesce(sum(psi) FILTER (WHERE label_id = -1), 0.0) AS micro
    FROM influence
    GROUP BY row_index
)
SELECT (SELECT avg(auc_after - auc_before) FROM auc WHERE label_id >= 0) AS macro_delta,
       (SELECT sum(macro * macro) FROM per_row) AS macro_squares,
       (SELECT any_value(auc_after - auc_before) FROM auc WHERE label_id = -1) AS micro_delta,
       (SELECT sum(micro * micro) FROM per_row) AS micro_squares;
