-- reads: paired_scores
-- creates: nothing
-- Per-row change of the log loss (this - other; probabilities clipped to [$eps, 1 - $eps] as in
-- metrics.sql) over paired_scores: count, mean and sample variance, for the paired normal test.
WITH d AS (
    SELECT ln(least(greatest(before[true_id + 1], $eps), 1 - $eps)) - ln(least(greatest(after[true_id + 1], $eps), 1 - $eps)) AS d
    FROM paired_scores
)
SELECT count(*), avg(d), var_samp(d) FROM d;
