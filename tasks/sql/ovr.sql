-- The one-vs-rest view of the scores, over evaluated rows whose truth the model knows: for each
-- model label and each distinct score of that label, how many rows are (pos) and are not (neg) of
-- that class, with the counts at or above that score (tp, fp) and the class totals. ROC-AUC,
-- average precision and the curves all read this table, so ties are grouped once, as
-- scikit-learn's curves group them (one point per distinct threshold).
CREATE TEMP TABLE ovr AS
WITH known AS (
    SELECT e.true_id, p.probabilities
    FROM evaluated AS e
    JOIN predictions AS p ON p.row_index = e.row_index
    WHERE e.true_id IS NOT NULL
), unnested AS (
    SELECT true_id, unnest(range(len(probabilities))) AS label_id, unnest(probabilities) AS score
    FROM known
), grouped AS (
    SELECT label_id, score,
           count(*) FILTER (WHERE label_id = true_id) AS pos,
           count(*) FILTER (WHERE label_id <> true_id) AS neg
    FROM unnested
    GROUP BY label_id, score
)
SELECT label_id, score, pos, neg,
       sum(pos) OVER at_or_above AS tp,
       sum(neg) OVER at_or_above AS fp,
       sum(pos) OVER (PARTITION BY label_id) AS positives,
       sum(neg) OVER (PARTITION BY label_id) AS negatives
FROM grouped
WINDOW at_or_above AS (PARTITION BY label_id ORDER BY score DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
