-- reads: paired, staged
-- creates: nothing
-- Accuracy change (this - other) over the paired rows by the values of one slice column ({column}
-- is a staged, canonical name), with the discordant rows McNemar's test reads; null is its own
-- group. The $limit largest groups, worst change first.
WITH groups AS (
    SELECT s.{column} AS value,
           count(*) AS rows,
           avg(CASE WHEN p.right_after THEN 1.0 ELSE 0.0 END) - avg(CASE WHEN p.right_before THEN 1.0 ELSE 0.0 END) AS delta,
           count(*) FILTER (WHERE p.right_before AND NOT p.right_after) AS right_to_wrong,
           count(*) FILTER (WHERE p.right_after AND NOT p.right_before) AS wrong_to_right
    FROM paired AS p
    JOIN staged AS s ON s.row_index = p.row_index
    GROUP BY s.{column}
), largest AS (
    SELECT * FROM groups ORDER BY rows DESC, value NULLS FIRST LIMIT $limit
)
SELECT value IS NULL AS is_null, value, rows, delta, right_to_wrong, wrong_to_right
FROM largest
ORDER BY delta, rows DESC, value NULLS FIRST;
