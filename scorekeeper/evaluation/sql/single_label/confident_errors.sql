-- reads: evaluated, staged
-- creates: nothing
-- The wrong rows the model was surest of, highest score first, with the start of their text.
-- The rows are chosen before the texts are joined: only $limit texts are read, not every row's.
WITH worst AS (
    SELECT row_index, true_name, pred_name, score
    FROM evaluated
    WHERE NOT correct
    ORDER BY score DESC, row_index
    LIMIT $limit
)
SELECT w.row_index, s.id, left(s.text, $chars) AS text, w.true_name, w.pred_name, w.score
FROM worst AS w
JOIN staged AS s ON s.row_index = w.row_index
ORDER BY w.score DESC, w.row_index;
