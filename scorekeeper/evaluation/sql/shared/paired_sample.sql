-- reads: <table>
-- creates: nothing
-- The rows of a comparison's paired table {table} at the given 0-based positions in row order
-- ($positions), one row each with its {first}, {second} and {third} as lists in {key} order: the
-- fixed-seed sample the row-sample bootstrap resamples (scorekeeper/evaluation/statistics/paired_blocks.py).
WITH numbered AS (
    SELECT row_index, row_number() OVER (ORDER BY row_index) - 1 AS position
    FROM (SELECT DISTINCT row_index FROM {table})
)
SELECT list(c.{first} ORDER BY c.{key}), list(c.{second} ORDER BY c.{key}), list(c.{third} ORDER BY c.{key})
FROM {table} AS c
JOIN numbered AS n ON n.row_index = c.row_index
WHERE n.position IN (SELECT unnest($positions::BIGINT[]))
GROUP BY c.row_index
ORDER BY c.row_index;
