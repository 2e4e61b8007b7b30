-- Ground-truth values the model cannot predict, with their counts.
SELECT true_name, count(*) AS n
FROM evaluated
WHERE true_id IS NULL
GROUP BY true_name
ORDER BY n DESC, true_name;
