-- reads: <source>
-- creates: nothing
-- Pearson's r of {x} and {y} per output over {source}, as scipy.stats.pearsonr computes it (means
-- first, clipped to [-1, 1]); null when either side is constant or there are fewer than 2 rows.
-- r is scale-free, so each side is first divided by its largest |value|: no product or square
-- overflows or underflows at any magnitude. Over the average ranks of both sides it is scipy's
-- Spearman rho (ties share their mean rank).
WITH scales AS (
    SELECT output_id, nullif(max(abs({x})), 0) AS sx, nullif(max(abs({y})), 0) AS sy
    FROM {source}
    GROUP BY output_id
), scaled AS (
    SELECT s.output_id, coalesce(s.{x} / c.sx, 0.0) AS x, coalesce(s.{y} / c.sy, 0.0) AS y
    FROM {source} AS s
    JOIN scales AS c ON c.output_id = s.output_id
), means AS (
    SELECT output_id, avg(x) AS mx, avg(y) AS my
    FROM scaled
    GROUP BY output_id
)
SELECT s.output_id,
       CASE WHEN count(*) >= 2 AND min(s.x) < max(s.x) AND min(s.y) < max(s.y)
            THEN greatest(-1.0, least(1.0, sum((s.x - m.mx) * (s.y - m.my)) / sqrt(sum((s.x - m.mx) ^ 2)) / sqrt(sum((s.y - m.my) ^ 2))))
       END AS r
FROM scaled AS s
JOIN means AS m ON m.output_id = s.output_id
GROUP BY s.output_id
ORDER BY s.output_id;
