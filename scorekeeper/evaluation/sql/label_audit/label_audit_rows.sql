-- reads: audit_suspected, staged, labels
-- creates: nothing
-- The suspected rows with the largest margin first (ties: row order), with the start of their text.
-- The rows are chosen before the texts are joined: only $limit texts are read.
WITH top AS (
    SELECT row_index, true_id, suggested_id, margin
    FROM audit_suspected
    ORDER BY margin DESC, row_index
    LIMIT $limit
)
SELECT a.row_index, s.id, left(s.text, $chars) AS text, g.label_name AS given, l.label_name AS suggested, a.margin
FROM top AS a
JOIN staged AS s ON s.row_index = a.row_index
JOIN labels AS g ON g.label_id = a.true_id
JOIN labels AS l ON l.label_id = a.suggested_id
ORDER BY a.margin DESC, a.row_index;
