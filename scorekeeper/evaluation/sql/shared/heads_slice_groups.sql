-- reads: head_slice_rows, staged
-- creates: head_slice_groups
-- One slice column's groups for a multi-label or regression run ({column}: a staged, canonical
-- slice column; staged slice columns are text): rows, sum(num), sum(den) and exact rows of
-- head_slice_rows (multilabel_slice_rows.sql, regression_slice_rows.sql) per value. Null is its own group, never merged with a
-- text such as 'None' or 'null'; the $limit largest groups are kept as slice.sql keeps them (the
-- total count comes along). A value whose rows have no ground truth has no evaluated row: no group.
CREATE OR REPLACE TEMP TABLE head_slice_groups AS
WITH joined AS (
    SELECT s.{column} AS value, r.*
    FROM head_slice_rows AS r
    JOIN staged AS s ON s.row_index = r.row_index
), groups AS (
    SELECT value, count(*) AS rows, sum(num) AS num, sum(den) AS den, count(*) FILTER (WHERE exact) AS exact
    FROM joined
    GROUP BY value
)
SELECT row_number() OVER (ORDER BY rows DESC, value NULLS FIRST) AS group_id, *, (SELECT count(*) FROM groups) AS groups
FROM groups
ORDER BY rows DESC, value NULLS FIRST
LIMIT $limit;
