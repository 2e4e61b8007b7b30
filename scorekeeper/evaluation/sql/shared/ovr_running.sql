-- reads: <grouped>
-- creates: <table>
-- The one-vs-rest table named by the `table` macro (ovr.sql's shape) from the `grouped` macro, a
-- query giving (label_id, score, pos, neg) once per label and distinct score: adds the counts at or above each score (tp, fp) and
-- the label's totals (positives, negatives). ROC-AUC, average precision, the curves and DeLong's
-- placement values all read this table (ranking.sql, curves.sql), so ties are grouped once, as
-- scikit-learn's curves group them (one point per distinct threshold).
-- The window sorts every (label, score) pair, so its rows are kept narrow: 32-bit counts going in
-- (a count past 2^31 fails the cast, it is never wrapped), 64-bit sums coming out (DuckDB's sums are
-- 128-bit), and the totals from a grouping of a row per label joined afterwards rather than a
-- second window over every pair.
CREATE OR REPLACE TEMP TABLE {table} AS
WITH grouped AS (
    SELECT label_id, score, pos::INTEGER AS pos, neg::INTEGER AS neg
    FROM ({grouped})
), running AS (
    SELECT label_id, score, pos, neg,
           (sum(pos) OVER at_or_above)::BIGINT AS tp,
           (sum(neg) OVER at_or_above)::BIGINT AS fp
    FROM grouped
    WINDOW at_or_above AS (PARTITION BY label_id ORDER BY score DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), totals AS (
    SELECT label_id, sum(pos)::BIGINT AS positives, sum(neg)::BIGINT AS negatives
    FROM grouped
    GROUP BY label_id
)
SELECT r.label_id, r.score, r.pos, r.neg, r.tp, r.fp, t.positives, t.negatives
FROM running AS r
JOIN totals AS t ON t.label_id = r.label_id;
