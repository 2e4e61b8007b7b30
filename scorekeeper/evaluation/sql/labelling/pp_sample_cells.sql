-- reads: pp_sample, pp_cells, pp_targets
-- creates: nothing
-- The labelled plan rows' cells (docs/labelling.md): per target and row of L, its label-free
-- prediction f, its target Y and the row's inclusion probability pi (times the response rate), one
-- block per target in row_index order.
SELECT c.metric, c.term, c.row_index, c.f, t.y, s.pi
FROM pp_sample AS s
JOIN pp_cells AS c ON c.row_index = s.row_index
JOIN pp_targets AS t ON t.row_index = c.row_index AND t.metric = c.metric AND t.term = c.term
ORDER BY c.metric, c.term, c.row_index;
