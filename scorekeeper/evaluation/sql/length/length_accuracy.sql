-- reads: evaluated, length_rows
-- creates: nothing
-- A single-label run's evaluated rows within and over the window: rows, accuracy and its Wilson
-- 95% interval per side (the interval of accuracy and of the slices' accuracy).
SELECT l.over, count(*) AS rows, count(*) FILTER (WHERE e.correct) AS correct,
       wilson(count(*) FILTER (WHERE e.correct), count(*)) AS ci
FROM evaluated AS e
JOIN length_rows AS l ON l.row_index = e.row_index
GROUP BY l.over
ORDER BY l.over;
