-- reads: evaluated
-- creates: nothing
-- The one-vs-rest grouping of the scores (ovr_running.sql makes the table `ovr` of it), over
-- evaluated rows whose truth the model knows: for each model label and each distinct score of that
-- label, how many rows are (pos) and are not (neg) of that class.
WITH known AS (
    SELECT true_id, probabilities
    FROM evaluated
    WHERE true_id IS NOT NULL
), unnested AS (
    SELECT true_id, unnest(range(len(probabilities))) AS label_id, unnest(probabilities) AS score
    FROM known
)
SELECT label_id, score,
       count(*) FILTER (WHERE label_id = true_id) AS pos,
       count(*) FILTER (WHERE label_id <> true_id) AS neg
FROM unnested
GROUP BY label_id, score
