-- reads: ground_truth, staged
-- creates: truth
-- Ground truth in separate files, joined to the input rows on the id. When the two sides' id types
-- differ (integer vs text) both are compared as text: 7 matches '7', not '007'.
-- Expects views: staged (row_index, id), ground_truth (id, label). Macro: {id_cast} is '' or '::VARCHAR'.
CREATE TEMP TABLE truth AS
SELECT s.row_index, g.id{id_cast} AS id, CAST(g.label AS VARCHAR) AS raw_label
FROM ground_truth AS g
LEFT JOIN staged AS s ON s.id{id_cast} = g.id{id_cast}
WHERE g.label IS NOT NULL;
