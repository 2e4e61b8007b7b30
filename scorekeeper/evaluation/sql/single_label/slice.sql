-- reads: evaluated, staged
-- creates: nothing
-- Accuracy, counts and Wilson intervals by the values of one slice column ({column} is a staged,
-- canonical name; staged slice columns are text). Null is its own group, never merged with a text
-- such as 'None' or 'null'. The $limit largest groups are kept (the total count comes along), then
-- ordered worst accuracy first.
WITH groups AS (
    SELECT s.{column} AS value,
           count(*) AS rows,
           count(*) FILTER (WHERE e.correct) AS correct
    FROM evaluated AS e
    JOIN staged AS s ON s.row_index = e.row_index
    GROUP BY s.{column}
), largest AS (
    SELECT * FROM groups ORDER BY rows DESC, value NULLS FIRST LIMIT $limit
)
SELECT value IS NULL AS is_null, value, rows, correct::DOUBLE / rows AS accuracy, wilson(correct, rows) AS accuracy_ci,
       (SELECT count(*) FROM groups) AS groups
FROM largest
ORDER BY accuracy, rows DESC, value NULLS FIRST;
