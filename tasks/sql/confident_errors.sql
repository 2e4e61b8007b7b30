-- The wrong rows the model was surest of, highest score first, with the start of their text.
SELECT e.row_index, s.id, left(s.text, $chars) AS text, e.true_name, e.pred_name, e.score
FROM evaluated AS e
JOIN staged AS s ON s.row_index = e.row_index
WHERE NOT e.correct
ORDER BY e.score DESC, e.row_index
LIMIT $limit;
