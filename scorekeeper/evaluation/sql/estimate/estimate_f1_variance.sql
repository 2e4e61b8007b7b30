-- reads: estimate_cells
-- creates: nothing
-- The delta method's parts of an estimated F1's variance (docs/drift.md). $tp_gradient[k] and
-- $fn_gradient[k]: the F1's derivatives by label k's expected TP and FN, so a cell's g is the one of
-- its side (predicted: TP, else FN). The run's part: each row's outcomes are Bernoulli(q) per label
-- (multi-label) or one categorical draw over q (single-label, $renormalised), independent across
-- rows: the variance of sum g y is sum g^2 q (1 - q), or per row sum g^2 q - (sum g q)^2. The
-- reference's part: per (label, bin), h = the sum over this run's cells in it of dF/dq_raw (g, or
-- (g - sum over the row of g q) / row_sum through the renormalisation), with the cells and their
-- mean p; Python weighs h^2 by the bin's calibrated rate's variance. The first row holds the run's
-- part (label_id and bin null), the others one (label, bin) each.
WITH cells AS (
    SELECT *, CASE WHEN predicted THEN $tp_gradient[label_id + 1] ELSE $fn_gradient[label_id + 1] END AS g
    FROM estimate_cells
), per_row AS (
    SELECT row_index, sum(g * q) AS gq, sum(g * g * q) AS ggq, sum(g * g * q * (1 - q)) AS bernoulli
    FROM cells GROUP BY row_index
), run AS (
    SELECT CASE WHEN $renormalised THEN sum(ggq - gq * gq) ELSE sum(bernoulli) END AS variance FROM per_row
), reference AS (
    SELECT c.label_id, c.bin,
           sum(CASE WHEN $renormalised THEN (c.g - r.gq) / c.row_sum ELSE c.g END) AS h,
           count(*) AS cells, avg(c.p) AS mean_p
    FROM cells AS c JOIN per_row AS r USING (row_index)
    GROUP BY c.label_id, c.bin
)
SELECT NULL::BIGINT AS label_id, NULL::INTEGER AS bin, variance AS h, NULL::BIGINT AS cells, NULL::DOUBLE AS mean_p FROM run
UNION ALL
SELECT label_id, bin, h, cells, mean_p FROM reference
ORDER BY label_id NULLS FIRST, bin;
