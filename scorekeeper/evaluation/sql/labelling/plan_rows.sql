-- reads: pp_planned, predictions, staged
-- creates: nothing
-- report/label_plan.parquet (docs/labelling.md): the plan's rows in row_index order, with row_index,
-- id, the staged text column(s) ({texts}), every other prediction column, and the design's
-- inclusion_probability (pi), uncertainty (u) and label_free (f) (pp_planned holds them).
SELECT p.row_index, p.id, {texts}, p.* EXCLUDE (row_index, id),
       l.pi AS inclusion_probability, l.u AS uncertainty, l.f AS label_free
FROM pp_planned AS l
JOIN predictions AS p ON p.row_index = l.row_index
JOIN staged AS s ON s.row_index = l.row_index
ORDER BY p.row_index
