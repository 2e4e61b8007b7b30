-- reads: head_slice_rows, staged, head_slice_groups
-- creates: head_slice_units
-- The resampling units of each kept group, in a fixed order: its rows while it has at most $units,
-- else $units blocks of its rows (by a hash of row_index), each with the sums of its rows.
CREATE OR REPLACE TEMP TABLE head_slice_units AS
SELECT g.group_id,
       CASE WHEN g.rows <= $units THEN r.row_index ELSE hash(r.row_index) % $units END AS unit,
       sum(r.num)::DOUBLE AS num, sum(r.den)::DOUBLE AS den
FROM head_slice_rows AS r
JOIN staged AS s ON s.row_index = r.row_index
JOIN head_slice_groups AS g ON g.value IS NOT DISTINCT FROM s.{column}
GROUP BY ALL
ORDER BY ALL;
