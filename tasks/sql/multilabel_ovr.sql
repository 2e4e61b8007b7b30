-- The ranking view of a multi-label run's scores, in the shape of the `ovr` table (ovr.sql) so that
-- ranking.sql and curves.sql read it: per model label, and once more with every cell pooled under
-- label_id -1 (the micro average, as scikit-learn's average="micro" ravels the indicator matrix).
-- Ties are grouped once per distinct score; tp and fp count the cells at or above that score.
CREATE OR REPLACE TEMP TABLE ml_ovr AS
WITH grouped AS (
    SELECT label_id, prob AS score,
           count(*) FILTER (WHERE truth) AS pos,
           count(*) FILTER (WHERE NOT truth) AS neg
    FROM ml_cells
    GROUP BY label_id, prob
    UNION ALL
    SELECT -1 AS label_id, prob AS score,
           count(*) FILTER (WHERE truth) AS pos,
           count(*) FILTER (WHERE NOT truth) AS neg
    FROM ml_cells
    GROUP BY prob
)
SELECT label_id, score, pos, neg,
       sum(pos) OVER at_or_above AS tp,
       sum(neg) OVER at_or_above AS fp,
       sum(pos) OVER (PARTITION BY label_id) AS positives,
       sum(neg) OVER (PARTITION BY label_id) AS negatives
FROM grouped
WINDOW at_or_above AS (PARTITION BY label_id ORDER BY score DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
