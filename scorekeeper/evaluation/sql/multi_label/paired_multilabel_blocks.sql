-- reads: ml_paired_cells
-- creates: nothing
-- A multi-label comparison's per-block, per-label confusion counts of both runs over ml_paired_cells
-- (this run 'after', the other 'before', both against this run's truth): tp and fp of each run and
-- the label's support (fn = support - tp). Every F1, precision and recall average of either run is a
-- function of these sums, so the block bootstrap resamples them (scorekeeper/evaluation/statistics/paired_blocks.py).
-- {block}: the block of a row (its row_index, or a hash of it into a fixed number of blocks).
SELECT {block} AS block, label_id,
       count(*) FILTER (WHERE truth AND after) AS tp_after,
       count(*) FILTER (WHERE NOT truth AND after) AS fp_after,
       count(*) FILTER (WHERE truth AND before) AS tp_before,
       count(*) FILTER (WHERE NOT truth AND before) AS fp_before,
       count(*) FILTER (WHERE truth) AS support
FROM ml_paired_cells
GROUP BY ALL
ORDER BY ALL;
