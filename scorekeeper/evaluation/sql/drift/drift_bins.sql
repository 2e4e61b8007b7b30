-- reads: drift_numeric_counts, drift_categorical_counts, drift_edges
-- creates: drift_bins
-- Every signal's bins with both runs' counts (a: reference, b: current). Numeric: bins (-inf, e1]
-- ... (e_last, +inf), empty ones included, and nulls their own bin when either run has one.
-- Categorical: one bin per value seen in either run, null included; past $max_values values, the
-- reference's ($max_values - 1) most frequent (ties: the smaller value first) and `other` for the rest.
CREATE OR REPLACE TEMP TABLE drift_bins AS
WITH numeric_grid AS (
    SELECT e.signal, k.bin
    FROM drift_edges AS e, LATERAL (SELECT unnest(range(len(e.edges) + 1)) AS bin) AS k
), numeric_bins AS (
    SELECT g.signal, g.bin, false AS is_null, NULL::VARCHAR AS value, false AS is_other,
           coalesce(c.a, 0) AS a, coalesce(c.b, 0) AS b
    FROM numeric_grid AS g LEFT JOIN drift_numeric_counts AS c ON c.signal = g.signal AND c.bin = g.bin
    UNION ALL
    SELECT signal, NULL, true, NULL, false, a, b FROM drift_numeric_counts WHERE bin IS NULL
), ranked AS (
    SELECT signal, value, a, b,
           count(*) OVER (PARTITION BY signal) AS seen,
           row_number() OVER (PARTITION BY signal ORDER BY a DESC, value ASC NULLS LAST) AS rank
    FROM drift_categorical_counts
), categorical_bins AS (
    SELECT signal, NULL::BIGINT AS bin, kept AND bin_value IS NULL AS is_null, bin_value AS value,
           NOT kept AS is_other, sum(a) AS a, sum(b) AS b
    FROM (
        SELECT signal, a, b, kept, CASE WHEN kept THEN value END AS bin_value
        FROM (SELECT *, seen <= $max_values OR (rank < $max_values AND a > 0) AS kept FROM ranked)
    )
    GROUP BY signal, kept, bin_value
)
SELECT signal, bin, is_null, value, is_other, a::BIGINT AS a, b::BIGINT AS b FROM numeric_bins
UNION ALL
SELECT signal, bin, is_null, value, is_other, a::BIGINT, b::BIGINT FROM categorical_bins;
