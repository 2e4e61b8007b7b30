-- Accuracy change (this - other) over the paired rows by the values of one slice column ({column}
-- is a staged, canonical name); null is its own group. The $limit largest groups, worst change first.
WITH groups AS (
    SELECT s.{column} AS value,
           count(*) AS rows,
           avg(CASE WHEN p.right_after THEN 1.0 ELSE 0.0 END) - avg(CASE WHEN p.right_before THEN 1.0 ELSE 0.0 END) AS delta
    FROM paired AS p
    JOIN staged AS s ON s.row_index = p.row_index
    GROUP BY s.{column}
), largest AS (
    SELECT * FROM groups ORDER BY rows DESC, value NULLS FIRST LIMIT $limit
)
SELECT value IS NULL AS is_null, value, rows, delta
FROM largest
ORDER BY delta, rows DESC, value NULLS FIRST;
