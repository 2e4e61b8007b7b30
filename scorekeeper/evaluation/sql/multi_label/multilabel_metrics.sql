-- reads: ml_cells, ml_label_counts
-- creates: nothing
-- The multi-label headline metrics over `ml_cells` and `ml_label_counts`, one row. Definitions
-- are scikit-learn's (0/0 counts as 0 in precision, recall and F1). Per row: rank_ge is how many
-- of the row's labels score at least as high as this one, true_ge how many of those are true;
-- they give label_ranking_average_precision_score (a row with no true label, or every label
-- true, scores 1), coverage_error (0 for a row with no true label) and label_ranking_loss (true,
-- false) pairs ranked wrong or tied, over the row's pairs; 0 where it has none). log_loss is the
-- binary cross-entropy averaged over every cell, probabilities clipped to [$eps, 1 - $eps].
WITH ranked AS (
    SELECT row_index, truth, predicted,
           count(*) OVER at_or_above AS rank_ge,
           count(*) FILTER (WHERE truth) OVER at_or_above AS true_ge
    FROM ml_cells
    WINDOW at_or_above AS (PARTITION BY row_index ORDER BY prob DESC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), per_row AS (
    SELECT row_index,
           count(*) AS labels,
           count(*) FILTER (WHERE truth) AS n_true,
           count(*) FILTER (WHERE predicted) AS n_pred,
           count(*) FILTER (WHERE truth AND predicted) AS tp,
           bool_and(truth = predicted) AS exact,
           avg(true_ge / rank_ge) FILTER (WHERE truth) AS lrap,
           coalesce(max(rank_ge) FILTER (WHERE truth), 0) AS coverage,
           coalesce(sum(rank_ge - true_ge) FILTER (WHERE truth), 0) AS misordered
    FROM ranked
    GROUP BY row_index
), rows AS (
    SELECT count(*) AS evaluated,
           avg(CASE WHEN exact THEN 1.0 ELSE 0.0 END) AS subset_accuracy,
           avg(coalesce(2 * tp / nullif(n_true + n_pred, 0), 0.0)) AS samples_f1,
           avg(CASE WHEN n_true = 0 OR n_true = labels THEN 1.0 ELSE lrap END) AS lrap,
           avg(coverage) AS coverage_error,
           avg(CASE WHEN n_true = 0 OR n_true = labels THEN 0.0 ELSE misordered / (n_true * (labels - n_true)) END) AS ranking_loss,
           avg(n_true) AS truth_cardinality,
           avg(n_pred) AS predicted_cardinality,
           count(*) FILTER (WHERE n_pred = 0) AS rows_without_prediction
    FROM per_row
), labels AS (
    SELECT sum(tp) AS tp, sum(fp) AS fp, sum(fn) AS fn, sum(cells) AS cells,
           avg(f1) AS macro_f1,
           sum(f1 * support) / nullif(sum(support), 0) AS weighted_f1
    FROM ml_label_counts
), cells AS (
    SELECT -avg(CASE WHEN truth THEN ln(p) ELSE ln(1 - p) END) AS log_loss
    FROM (SELECT truth, least(greatest(prob, $eps), 1 - $eps) AS p FROM ml_cells)
)
SELECT r.evaluated, r.subset_accuracy,
       (l.fp + l.fn) / nullif(l.cells, 0) AS hamming_loss,
       coalesce(l.tp / nullif(l.tp + l.fp, 0), 0.0) AS micro_precision,
       coalesce(l.tp / nullif(l.tp + l.fn, 0), 0.0) AS micro_recall,
       coalesce(2 * l.tp / nullif(2 * l.tp + l.fp + l.fn, 0), 0.0) AS micro_f1,
       l.macro_f1, l.weighted_f1, r.samples_f1,
       r.lrap, r.coverage_error, r.ranking_loss, c.log_loss,
       r.truth_cardinality, r.predicted_cardinality, r.rows_without_prediction
FROM rows AS r, labels AS l, cells AS c;
