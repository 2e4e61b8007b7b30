-- reads: pp_cells, pp_sample
-- creates: nothing
-- The labelled plan rows' cells (docs/labelling.md): per target of the prediction-powered metrics,
-- the sample's rows (pp_sample: the labelled plan rows; the head kind's pp_cells holds the cells of
-- pp_focus, their predictions) with their label-free prediction f, in row_index order. (Each
-- target's sum of f over every row is the head kind's pp_cell_totals.)
SELECT c.metric, c.term, list(c.row_index ORDER BY c.row_index) AS sample_rows, list(c.f ORDER BY c.row_index) AS sample_f
FROM pp_cells AS c
SEMI JOIN pp_sample AS s ON s.row_index = c.row_index
GROUP BY ALL
ORDER BY ALL;
