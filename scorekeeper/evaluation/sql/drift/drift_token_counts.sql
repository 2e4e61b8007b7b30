-- reads: <reference_counts>, <current_counts>
-- creates: nothing
-- Both runs' content tokens (SPEC 14's moved tokens, words.py): per token id counted in either run,
-- each run's count (0 where it has none) and each run's string for it, by token id.
WITH r AS (
    SELECT token_id, min(token) AS token, sum("count") AS n FROM {reference_counts} GROUP BY token_id HAVING sum("count") > 0
), c AS (
    SELECT token_id, min(token) AS token, sum("count") AS n FROM {current_counts} GROUP BY token_id HAVING sum("count") > 0
)
SELECT coalesce(r.token_id, c.token_id)::BIGINT AS token_id, r.token AS reference_token, c.token AS current_token,
       coalesce(r.n, 0)::BIGINT AS a, coalesce(c.n, 0)::BIGINT AS b
FROM r FULL OUTER JOIN c ON r.token_id = c.token_id
ORDER BY token_id;
