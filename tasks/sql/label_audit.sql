-- Confident learning (Northcutt, Jiang & Chuang, JAIR 2021) over the evaluated rows whose label the
-- model knows. The threshold of class k is the mean probability of k over the rows labelled k. A
-- row is a suspected label error when at least one class reaches its threshold and the most
-- probable of those classes (ties: the lowest label id, as numpy's argmax) is not the given label:
-- the off-diagonal of the confident joint. margin = p(suggested) - p(given).
CREATE OR REPLACE TEMP TABLE audit_thresholds AS
SELECT true_id AS label_id, avg(probabilities[true_id + 1]) AS threshold
FROM evaluated
WHERE true_id IS NOT NULL
GROUP BY true_id;

CREATE OR REPLACE TEMP TABLE audit_suspected AS
WITH unnested AS (
    SELECT row_index, true_id, probabilities[true_id + 1] AS p_given,
           unnest(range(len(probabilities))) AS label_id, unnest(probabilities) AS probability
    FROM evaluated
    WHERE true_id IS NOT NULL
), confident AS (
    SELECT u.row_index, any_value(u.true_id) AS true_id, any_value(u.p_given) AS p_given,
           first(u.label_id ORDER BY u.probability DESC, u.label_id) AS suggested_id,
           max(u.probability) AS p_suggested
    FROM unnested AS u
    JOIN audit_thresholds AS t ON t.label_id = u.label_id AND u.probability >= t.threshold
    GROUP BY u.row_index
)
SELECT row_index, true_id, suggested_id, p_suggested - p_given AS margin
FROM confident
WHERE suggested_id <> true_id;
