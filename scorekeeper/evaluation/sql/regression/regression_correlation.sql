-- reads: <source>
-- creates: nothing
-- Pearson's r of {x} and {y} per output over {source}, as scipy.stats.pearsonr computes it (means
-- first, clipped to [-1, 1]); null when either side is constant or there are fewer than 2 rows.
-- Over the average ranks of both sides it is scipy's Spearman rho (ties share their mean rank).
WITH means AS (
    SELECT output_id, avg({x}) AS mx, avg({y}) AS my
    FROM {source}
    GROUP BY output_id
)
SELECT s.output_id,
       CASE WHEN count(*) >= 2 AND min(s.{x}) < max(s.{x}) AND min(s.{y}) < max(s.{y})
            THEN greatest(-1.0, least(1.0, sum((s.{x} - m.mx) * (s.{y} - m.my)) / sqrt(sum((s.{x} - m.mx) ^ 2) * sum((s.{y} - m.my) ^ 2))))
       END AS r
FROM {source} AS s
JOIN means AS m ON m.output_id = s.output_id
GROUP BY s.output_id
ORDER BY s.output_id;
