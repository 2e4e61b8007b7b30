-- reads: ml_paired_cells
-- creates: nothing
-- A multi-label comparison's per-block calibration gaps over ml_paired_cells: per block, side (0:
-- this run, 1: the other, its probabilities in this run's label order), label and bin (as
-- multilabel_calibration.sql bins: [b/$bins, (b+1)/$bins), the last one holding 1.0) the sum of truth - probability. A label's
-- ECE is sum over bins |gap| / rows, the micro ECE the same over the bins' gaps summed over labels.
WITH sides AS (
    SELECT row_index, label_id, truth, 0 AS side, prob_after AS prob FROM ml_paired_cells
    UNION ALL
    SELECT row_index, label_id, truth, 1 AS side, prob_before AS prob FROM ml_paired_cells
)
SELECT {block} AS block, side, label_id,
       least(CAST(floor(prob * $bins) AS INTEGER), $bins - 1) AS bin,
       sum(CASE WHEN truth THEN 1.0 ELSE 0.0 END - prob) AS gap
FROM sides
GROUP BY ALL
ORDER BY ALL;
