-- reads: pp_label_free
-- creates: pp_design
-- The labelling plan's design over every scored row (docs/labelling.md): weights w ($active: 0.9 u /
-- mean(u) + 0.1, or 1 when mean(u) = 0; else 1), inclusion probabilities pi = min(1, c w) with c the
-- constant for which they sum to $target = min(B, N) (iterative capping: the k largest weights are
-- taken with certainty for the smallest k at which (target - k) w_(k+1) <= the sum of the weights
-- after the k-th; ties fall on the same side), and the draw U = the first 8 bytes of
-- sha256('{$key}:{row_index}') as a big-endian unsigned integer / 2^64.
CREATE OR REPLACE TEMP TABLE pp_design AS
WITH stats AS (
    SELECT avg(u) AS mean_u FROM pp_label_free
), weighted AS (
    SELECT r.row_index, r.f, r.u,
           CASE WHEN NOT $active OR s.mean_u = 0 THEN 1.0 ELSE 0.9 * r.u / s.mean_u + 0.1 END AS w
    FROM pp_label_free AS r CROSS JOIN stats AS s
), ranked AS (
    SELECT *,
           row_number() OVER (ORDER BY w DESC, row_index) AS rank,
           sum(w) OVER (ORDER BY w DESC, row_index ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running,
           sum(w) OVER () AS total
    FROM weighted
), cut AS (
    -- k = rank - 1 rows capped: the first rank at which the rest fit under 1
    SELECT coalesce(min(rank) FILTER (WHERE ($target - (rank - 1)) * w <= total - running + w), $target + 1) AS first_free
    FROM ranked
    WHERE rank <= $target
), scale AS (
    SELECT c.first_free,
           ($target - (c.first_free - 1)) / nullif((SELECT sum(w) FROM ranked WHERE rank >= c.first_free), 0) AS c
    FROM cut AS c
)
SELECT r.row_index, r.f, r.u, r.w,
       CASE WHEN r.rank < s.first_free OR s.c IS NULL THEN 1.0 ELSE least(1.0, s.c * r.w) END AS pi,
       ('0x' || left(sha256($key || ':' || r.row_index::VARCHAR), 16))::UBIGINT::DOUBLE / 18446744073709551616.0 AS draw
FROM ranked AS r CROSS JOIN scale AS s;
