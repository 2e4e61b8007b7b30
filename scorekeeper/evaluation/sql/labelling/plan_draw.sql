-- reads: pp_design
-- creates: pp_drawn, pp_planned
-- The labelling plan's rows (docs/labelling.md) from one pass over the design: pp_drawn (one row) the
-- sum of pi over every scored row (label_plan.expected_rows) and the rows {planned} selects (draw < pi
-- for a new plan; for a pinned plan, the rows of its file, getvariable('pp_plan_file')) with their f,
-- u and pi; pp_planned those rows in row_index order.
CREATE OR REPLACE TEMP TABLE pp_drawn AS
SELECT sum(pi) AS expected,
       coalesce(list(struct_pack(row_index, f, u, pi) ORDER BY row_index) FILTER (WHERE {planned}), []) AS planned
FROM pp_design;

CREATE OR REPLACE TEMP TABLE pp_planned AS
SELECT unnest(planned, recursive := true) FROM pp_drawn;
