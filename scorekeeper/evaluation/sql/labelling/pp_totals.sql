-- reads: pp_cells, pp_sample
-- creates: nothing
-- One pass over every scored row's cells (docs/labelling.md): per target of the prediction-powered
-- metrics, the sum of its label-free prediction f over all rows, and the sample's rows (pp_sample:
-- the labelled plan rows) with their f, in row_index order.
SELECT c.metric, c.term, sum(c.f) AS f_all,
       list(c.row_index ORDER BY c.row_index) FILTER (WHERE s.row_index IS NOT NULL) AS sample_rows,
       list(c.f ORDER BY c.row_index) FILTER (WHERE s.row_index IS NOT NULL) AS sample_f
FROM pp_cells AS c
LEFT JOIN pp_sample AS s ON s.row_index = c.row_index
GROUP BY ALL
ORDER BY ALL;
