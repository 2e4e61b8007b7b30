-- reads: paired_scores
-- creates: paired_ranks
-- The one-vs-rest view (as ovr.sql) of both runs' scores over paired_scores, one side at a time
-- ('before' = the other run, 'after' = this run): per label and distinct score, the rows of (pos)
-- and not of (neg) that class, the counts at or above that score (tp, fp) and the class totals.
-- ROC-AUC, average precision and DeLong's placement values are all read from it.
CREATE OR REPLACE TEMP TABLE paired_ranks AS
WITH unnested AS (
    SELECT true_id, unnest(range(len(after))) AS label_id, unnest(before) AS s_before, unnest(after) AS s_after
    FROM paired_scores
), sides AS (
    SELECT 'before' AS side, true_id, label_id, s_before AS score FROM unnested
    UNION ALL
    SELECT 'after', true_id, label_id, s_after FROM unnested
), grouped AS (
    SELECT side, label_id, score,
           count(*) FILTER (WHERE label_id = true_id) AS pos,
           count(*) FILTER (WHERE label_id <> true_id) AS neg
    FROM sides
    GROUP BY side, label_id, score
)
SELECT side, label_id, score, pos, neg,
       sum(pos) OVER at_or_above AS tp,
       sum(neg) OVER at_or_above AS fp,
       sum(pos) OVER (PARTITION BY side, label_id) AS positives,
       sum(neg) OVER (PARTITION BY side, label_id) AS negatives
FROM grouped
WINDOW at_or_above AS (PARTITION BY side, label_id ORDER BY score DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
