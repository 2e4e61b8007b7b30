-- reads: head_slice_rows, length_rows
-- creates: length_units
-- A multi-label or regression run's evaluated rows (head_slice_rows: num, den and exact per row,
-- as the slices read them) within and over the window, as resampling units: the side's rows while
-- it has at most $units, else $units blocks of its rows (by a hash of row_index), each with its sums.
CREATE OR REPLACE TEMP TABLE length_units AS
WITH sides AS (
    SELECT l.over, r.*, count(*) OVER (PARTITION BY l.over) AS side_rows
    FROM head_slice_rows AS r
    JOIN length_rows AS l ON l.row_index = r.row_index
)
SELECT over,
       CASE WHEN side_rows <= $units THEN row_index ELSE hash(row_index) % $units END AS unit,
       count(*) AS rows, sum(num)::DOUBLE AS num, sum(den)::DOUBLE AS den
FROM sides
GROUP BY ALL
ORDER BY ALL;
