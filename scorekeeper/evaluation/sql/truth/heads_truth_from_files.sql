-- reads: ground_truth, staged
-- creates: truth
-- Ground truth of a multi-label or regression head in separate files, joined on the id (as
-- truth_from_files.sql joins a single-label one). Expects views: staged (row_index, id),
-- ground_truth (id, label). Macro: {id_cast} is '' or '::VARCHAR'.
CREATE TEMP TABLE truth AS
SELECT s.row_index, g.id{id_cast} AS id, g.label AS value
FROM ground_truth AS g
LEFT JOIN staged AS s ON s.id{id_cast} = g.id{id_cast}
WHERE g.label IS NOT NULL;
