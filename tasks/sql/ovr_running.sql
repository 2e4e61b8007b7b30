-- The one-vs-rest table named by the `table` macro (ovr.sql's shape) from the `grouped` macro, a
-- query giving (label_id, score, pos, neg) once per label and distinct score: adds the counts at or above each score (tp, fp) and
-- the label's totals (positives, negatives). ROC-AUC, average precision, the curves and DeLong's
-- placement values all read this table (ranking.sql, curves.sql), so ties are grouped once, as
-- scikit-learn's curves group them (one point per distinct threshold).
CREATE OR REPLACE TEMP TABLE {table} AS
WITH grouped AS (
{grouped}
)
SELECT label_id, score, pos, neg,
       sum(pos) OVER at_or_above AS tp,
       sum(neg) OVER at_or_above AS fp,
       sum(pos) OVER (PARTITION BY label_id) AS positives,
       sum(neg) OVER (PARTITION BY label_id) AS negatives
FROM grouped
WINDOW at_or_above AS (PARTITION BY label_id ORDER BY score DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
