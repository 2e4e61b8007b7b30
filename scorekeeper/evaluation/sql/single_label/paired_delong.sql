-- reads: paired_scores, paired_ranks
-- creates: nothing
-- DeLong's structural components of the macro ROC-AUC change, per row: for each label with both
-- positives and negatives, a positive row's placement value is the negatives it outscores (ties one
-- half), a negative row's the positives that outscore it; the row adds (placement this run -
-- placement other run) / (positives * negatives) to that label's AUC change, and phi is the mean of
-- those over the $classes labels. Returned: per true class, its rows and the sample variance of phi.
WITH unnested AS (
    SELECT row_index, true_id, unnest(range(len(after))) AS label_id, unnest(before) AS s_before, unnest(after) AS s_after
    FROM paired_scores
), defined AS (
    SELECT DISTINCT label_id, positives, negatives
    FROM paired_ranks
    WHERE side = 'after' AND positives > 0 AND negatives > 0
), contributions AS (
    SELECT u.row_index, u.true_id,
           CASE WHEN u.true_id = u.label_id
                THEN (b.fp - b.neg / 2.0) - (a.fp - a.neg / 2.0)  -- (negatives - fp + neg/2): this - other
                ELSE (a.tp - a.pos / 2.0) - (b.tp - b.pos / 2.0)
           END / (d.positives::DOUBLE * d.negatives) AS contribution
    FROM unnested AS u
    JOIN defined AS d ON d.label_id = u.label_id
    JOIN paired_ranks AS b ON b.side = 'before' AND b.label_id = u.label_id AND b.score = u.s_before
    JOIN paired_ranks AS a ON a.side = 'after' AND a.label_id = u.label_id AND a.score = u.s_after
), per_row AS (
    SELECT row_index, any_value(true_id) AS true_id, sum(contribution) / $classes AS phi
    FROM contributions
    GROUP BY row_index
)
SELECT true_id, count(*) AS n, var_samp(phi) AS variance
FROM per_row
GROUP BY true_id
ORDER BY true_id;
