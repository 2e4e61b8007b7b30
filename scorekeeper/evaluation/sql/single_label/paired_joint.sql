-- reads: paired
-- creates: nothing
-- The joint table of the paired rows: counts by (truth, the other run's prediction, this run's
-- prediction), label names. Every count-based metric of either run over these rows (F1, precision,
-- recall and their averages) is a function of it, so its paired bootstrap resamples this table.
SELECT true_name, before, after, count(*) AS n
FROM paired
GROUP BY ALL
ORDER BY ALL;
