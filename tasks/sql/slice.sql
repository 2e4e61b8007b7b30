-- Accuracy and counts by the values of one slice column ({column} is a staged, canonical name).
SELECT CAST(s.{column} AS VARCHAR) AS value,
       count(*) AS rows,
       avg(CASE WHEN e.correct THEN 1.0 ELSE 0.0 END) AS accuracy
FROM evaluated AS e
JOIN staged AS s ON s.row_index = e.row_index
GROUP BY 1
ORDER BY rows DESC, value
LIMIT 50;
