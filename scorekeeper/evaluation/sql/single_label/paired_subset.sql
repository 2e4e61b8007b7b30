-- reads: paired_scores
-- creates: nothing
-- The rows of paired_scores at the given 0-based positions in row order ($positions), for the
-- resampling of average precision.
WITH numbered AS (
    SELECT true_id, before, after, row_number() OVER (ORDER BY row_index) - 1 AS position
    FROM paired_scores
)
SELECT true_id, before, after
FROM numbered
WHERE position IN (SELECT unnest($positions::BIGINT[]))
ORDER BY position;
