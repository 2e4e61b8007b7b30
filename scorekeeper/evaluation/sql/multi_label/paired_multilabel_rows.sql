-- reads: ml_cells, ml_paired, labels
-- creates: ml_paired_rows
-- A multi-label comparison's per-row differences (this run - the other run) of the metrics that are
-- means over rows, both sides judged against this run's truth with the formulas of
-- multilabel_metrics.sql: samples_f1, hamming_loss (a row's wrong cells over its labels: every row
-- has every label, so their mean is the hamming loss), lrap, coverage_error, ranking_loss, log_loss
-- (the row's mean binary cross-entropy, probabilities clipped to [$eps, 1 - $eps]). The
-- other run's decisions are its own (`predicted_labels`, its thresholds); its probabilities are
-- put in this run's label order by $positions (1-based; empty when its labels differ: the
-- ranking and log-loss columns are then null). Expects: ml_cells (this run), ml_paired (row_index,
-- before = the other's predicted_labels, before_probabilities), labels.
CREATE OR REPLACE TEMP TABLE ml_paired_rows AS
WITH side_cells AS (
    SELECT c.row_index, 'after' AS side, c.truth, c.predicted, c.prob
    FROM ml_cells AS c
    JOIN ml_paired AS p ON p.row_index = c.row_index
    UNION ALL
    SELECT c.row_index, 'before' AS side, c.truth, list_contains(p.before, l.label_name) AS predicted,
           p.before_probabilities[$positions[c.label_id + 1]] AS prob
    FROM ml_cells AS c
    JOIN ml_paired AS p ON p.row_index = c.row_index
    JOIN labels AS l ON l.label_id = c.label_id
), ranked AS (
    SELECT row_index, side, truth, predicted,
           count(*) OVER at_or_above AS rank_ge,
           count(*) FILTER (WHERE truth) OVER at_or_above AS true_ge,
           prob IS NULL AS unranked,
           CASE WHEN truth THEN -ln(least(greatest(prob, $eps), 1 - $eps)) ELSE -ln(1 - least(greatest(prob, $eps), 1 - $eps)) END AS cross_entropy
    FROM side_cells
    WINDOW at_or_above AS (PARTITION BY row_index, side ORDER BY prob DESC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), per_row AS (
    SELECT row_index, side,
           count(*) AS labels,
           count(*) FILTER (WHERE truth) AS n_true,
           count(*) FILTER (WHERE predicted) AS n_pred,
           count(*) FILTER (WHERE truth AND predicted) AS tp,
           count(*) FILTER (WHERE truth <> predicted) AS wrong,
           bool_or(unranked) AS unranked,
           avg(cross_entropy) AS log_loss,
           avg(true_ge / rank_ge) FILTER (WHERE truth) AS lrap,
           coalesce(max(rank_ge) FILTER (WHERE truth), 0) AS coverage,
           coalesce(sum(rank_ge - true_ge) FILTER (WHERE truth), 0) AS misordered
    FROM ranked
    GROUP BY row_index, side
), metrics AS (
    SELECT row_index, side, unranked, log_loss,
           coalesce(2 * tp / nullif(n_true + n_pred, 0), 0.0) AS samples_f1,
           wrong / labels AS hamming_loss,
           CASE WHEN n_true = 0 OR n_true = labels THEN 1.0 ELSE lrap END AS lrap,
           coverage::DOUBLE AS coverage_error,
           CASE WHEN n_true = 0 OR n_true = labels THEN 0.0 ELSE misordered / (n_true * (labels - n_true)) END AS ranking_loss
    FROM per_row
)
SELECT a.row_index,
       a.samples_f1 - b.samples_f1 AS samples_f1,
       a.hamming_loss - b.hamming_loss AS hamming_loss,
       CASE WHEN NOT b.unranked THEN a.lrap - b.lrap END AS lrap,
       CASE WHEN NOT b.unranked THEN a.coverage_error - b.coverage_error END AS coverage_error,
       CASE WHEN NOT b.unranked THEN a.ranking_loss - b.ranking_loss END AS ranking_loss,
       CASE WHEN NOT b.unranked THEN a.log_loss - b.log_loss END AS log_loss
FROM metrics AS a
JOIN metrics AS b ON b.row_index = a.row_index AND b.side = 'before'
WHERE a.side = 'after';
