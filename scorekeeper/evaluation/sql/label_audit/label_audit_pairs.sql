-- reads: audit_suspected, labels
-- creates: nothing
-- Suspected rows by (given label, suggested label).
SELECT g.label_name, l.label_name, count(*) AS n
FROM audit_suspected AS a
JOIN labels AS g ON g.label_id = a.true_id
JOIN labels AS l ON l.label_id = a.suggested_id
GROUP BY ALL
ORDER BY ALL;
