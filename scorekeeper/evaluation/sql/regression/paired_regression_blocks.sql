-- reads: reg_paired_complete
-- creates: nothing
-- A regression comparison's per-block, per-output sums and extremes over reg_paired_complete (this
-- run 'after', the other 'before'), laid out as scorekeeper/evaluation/statistics/paired_blocks.py's SUM_FIELDS and
-- HIGH_FIELDS: y centred on its mean, each run's error e = prediction - y (squared, absolute, and
-- centred on its mean) and prediction centred on its mean, so sums of squares do not cancel; then
-- the largest |e| of each run and the ranges of y and of both predictions (minima negated).
-- {block}: the block of a row (its row_index, or a hash of it into a fixed number of blocks).
WITH means AS (
    SELECT output_id, avg(y) AS my, avg(after - y) AS mea, avg(before - y) AS meb, avg(after) AS mpa, avg(before) AS mpb
    FROM reg_paired_complete
    GROUP BY output_id
), c AS (
    SELECT r.row_index, r.output_id, r.y, r.after, r.before,
           r.y - m.my AS yc, r.after - r.y AS ea, r.before - r.y AS eb,
           r.after - r.y - m.mea AS eca, r.before - r.y - m.meb AS ecb,
           r.after - m.mpa AS pca, r.before - m.mpb AS pcb
    FROM reg_paired_complete AS r
    JOIN means AS m ON m.output_id = r.output_id
)
SELECT {block} AS block, output_id,
       count(*)::DOUBLE, sum(yc), sum(yc * yc), sum(abs(y)),
       sum(ea * ea), sum(abs(ea)), sum(eca), sum(eca * eca), sum(pca), sum(pca * pca), sum(yc * pca),
       sum(eb * eb), sum(abs(eb)), sum(ecb), sum(ecb * ecb), sum(pcb), sum(pcb * pcb), sum(yc * pcb),
       max(abs(ea)), max(abs(eb)), max(y), -min(y), max(after), -min(after), max(before), -min(before)
FROM c
GROUP BY ALL
ORDER BY ALL;
