-- reads: pp_cells
-- creates: nothing
-- Per target of the prediction-powered metrics (docs/labelling.md), the sum of its label-free
-- prediction f over every scored row.
SELECT metric, term, sum(f) AS f_all FROM pp_cells GROUP BY ALL ORDER BY ALL;
