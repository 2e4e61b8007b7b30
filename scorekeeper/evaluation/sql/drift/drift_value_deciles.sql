-- reads: drift_value_counts
-- creates: nothing
-- drift_deciles.sql's values from the counts per value: the reference's value at each 1-based rank
-- of $ranks (the smallest value whose running count of reference rows reaches the rank).
WITH running AS (
    SELECT num, sum(a) OVER (ORDER BY num) AS below
    FROM drift_value_counts
    WHERE num IS NOT NULL
)
SELECT list(edge ORDER BY rank)
FROM (
    SELECT r.rank, min(v.num) AS edge
    FROM running AS v, (SELECT unnest($ranks::BIGINT[]) AS rank) AS r
    WHERE v.below >= r.rank
    GROUP BY r.rank
);
