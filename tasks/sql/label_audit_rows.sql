-- The suspected rows with the largest margin first (ties: row order), with the start of their text.
SELECT a.row_index, s.id, left(s.text, $chars) AS text, g.label_name AS given, l.label_name AS suggested, a.margin
FROM audit_suspected AS a
JOIN staged AS s ON s.row_index = a.row_index
JOIN labels AS g ON g.label_id = a.true_id
JOIN labels AS l ON l.label_id = a.suggested_id
ORDER BY a.margin DESC, a.row_index
LIMIT $limit;
