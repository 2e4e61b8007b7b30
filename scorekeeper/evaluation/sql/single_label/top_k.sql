-- reads: evaluated
-- creates: nothing
-- Top-k accuracy for k = 2..$kmax: the share of evaluated rows whose true label is among the k
-- highest probabilities. Ties are ordered as scikit-learn's top_k_accuracy_score orders them (a
-- stable ascending sort, reversed: of equal probabilities, the higher label id ranks first). Rows
-- whose truth the model cannot predict are misses (they are in the caller's denominator only).
WITH known AS (
    SELECT row_index, true_id, probabilities
    FROM evaluated
    WHERE true_id IS NOT NULL
), unnested AS (
    SELECT row_index, true_id, probabilities[true_id + 1] AS p_true,
           unnest(range(len(probabilities))) AS label_id, unnest(probabilities) AS s
    FROM known
), ranks AS (
    SELECT row_index, count(*) FILTER (WHERE s > p_true OR (s = p_true AND label_id > true_id)) AS above
    FROM unnested
    GROUP BY row_index
)
SELECT ks.k, count(r.row_index) FILTER (WHERE r.above < ks.k) AS hits
FROM range(2, $kmax + 1) AS ks(k)
CROSS JOIN ranks AS r
GROUP BY ks.k
ORDER BY ks.k;
