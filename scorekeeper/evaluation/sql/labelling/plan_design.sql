-- reads: pp_label_free
-- creates: pp_scale, pp_design
-- The labelling plan's design over every scored row (docs/labelling.md): weights w (pp_active: 0.9 u /
-- mean(u) + 0.1, or 1 when mean(u) = 0; else 1), inclusion probabilities pi = min(1, c w) with c the
-- constant for which they sum to pp_target = min(B, N) (iterative capping: the k largest weights are
-- taken with certainty for the smallest k at which (target - k) w_(k+1) <= the sum of the weights
-- after the k-th; ties fall on the same side, so the capped rows are those whose weight reaches the
-- k-th largest; a budget of every row, pp_target = N, takes every row with pi exactly 1, the only
-- answer summing to N, which c w of the last free rows would miss by a rounding), and the draw U = the first 8 bytes of sha256('{pp_key}:{row_index}') as a big-endian
-- unsigned integer / 2^64 (pp_key: the run id). pp_NAME: DuckDB variables (labelling.set_variables).
-- Only the pp_target largest weights decide the capping: pp_scale (one row) holds what pi needs from
-- one pass over the rows (mean(u), the weights' sum, the cut) and, from the same pass, the sum of f
-- over every row (sum_f: the total of the target whose f pp_label_free's is); pp_design is a view, so that pi costs
-- a multiplication per row and the draw (sha256 of every row, the plan's largest cost) is computed
-- only by the query that reads it.
CREATE OR REPLACE TEMP TABLE pp_scale AS
WITH stats AS (
    SELECT avg(u) AS mean_u, count(*) AS n, sum(u) AS sum_u, max(u, getvariable('pp_target')) AS top_u, sum(f) AS sum_f FROM pp_label_free
), weighting AS (
    SELECT mean_u, top_u, sum_f, getvariable('pp_target') >= n AS every_row, getvariable('pp_active') AND mean_u <> 0 AS weighted,
           -- the sum of every row's weight: sum(0.9 u / mean(u) + 0.1) = 0.9 sum(u) / mean(u) + 0.1 N
           CASE WHEN getvariable('pp_active') AND mean_u <> 0 THEN 0.9 * sum_u / mean_u + 0.1 * n ELSE n::DOUBLE END AS total
    FROM stats
), top AS (
    SELECT unnest(generate_series(1, len(top_u))) AS rank, unnest(top_u) AS u FROM weighting
), ranked AS (
    SELECT t.rank, s.total,
           CASE WHEN s.weighted THEN 0.9 * t.u / s.mean_u + 0.1 ELSE 1.0 END AS w
    FROM top AS t CROSS JOIN weighting AS s
), running AS (
    SELECT *, sum(w) OVER (ORDER BY rank ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running FROM ranked
), cut AS (
    -- k = rank - 1 rows capped: the first rank at which the rest fit under 1
    SELECT coalesce(min(rank) FILTER (WHERE (getvariable('pp_target') - (rank - 1)) * w <= total - running + w), getvariable('pp_target') + 1) AS first_free
    FROM running
)
SELECT s.weighted, s.every_row, s.mean_u, s.sum_f,
       (SELECT min(w) FROM ranked WHERE rank < c.first_free) AS capped_from,
       (getvariable('pp_target') - (c.first_free - 1)) / nullif(s.total - coalesce((SELECT sum(w) FROM ranked WHERE rank < c.first_free), 0), 0) AS c
FROM weighting AS s CROSS JOIN cut AS c;

CREATE OR REPLACE TEMP VIEW pp_design AS
WITH weighted AS (
    SELECT r.row_index, r.f, r.u, CASE WHEN s.weighted THEN 0.9 * r.u / s.mean_u + 0.1 ELSE 1.0 END AS w, s.every_row, s.capped_from, s.c
    FROM pp_label_free AS r CROSS JOIN pp_scale AS s
)
SELECT row_index, f, u, w,
       CASE WHEN every_row OR w >= capped_from OR c IS NULL THEN 1.0 ELSE least(1.0, c * w) END AS pi,
       ('0x' || left(sha256(getvariable('pp_key') || ':' || row_index::VARCHAR), 16))::UBIGINT::DOUBLE / 18446744073709551616.0 AS draw
FROM weighted;
