-- reads: reg_cells, drift_edges, drift_labels
-- creates: nothing
-- What a later run's MAE estimate needs of a regression run (docs/drift.md): per output, its
-- evaluated cells in the bins of its `prediction` drift signal (the run's own merged deciles of its
-- predictions; bin k = (e_k, e_k+1]) with their mean absolute error.
SELECT c.output_id,
       list_count(list_filter(e.edges, lambda x: c.prediction > x)) AS bin,
       count(*) AS rows,
       avg(abs(c.prediction - c.truth)) AS mae
FROM reg_cells AS c
JOIN drift_labels AS l ON l.label_id = c.output_id
JOIN drift_edges AS e ON e.signal = l.label_name
GROUP BY ALL
ORDER BY ALL;
