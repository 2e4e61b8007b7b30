-- reads: drift_values, drift_edges
-- creates: drift_bins
-- Every signal's bins with both runs' counts (a: reference, b: current), in one pass over the values.
-- Numeric: bin k holds values in (e_k, e_k+1] (k = number of edges below the value; bins (-inf, e1]
-- ... (e_last, +inf), empty ones included), and nulls their own bin. Categorical: one bin per value
-- seen in either run, null included; past $max_values values, the reference's ($max_values - 1)
-- most frequent (ties: the smaller value first) and `other` for the rest.
CREATE OR REPLACE TEMP TABLE drift_bins AS
WITH numeric_values AS (
    SELECT v.signal, v.side,
           -- the edges below the value: at most 9 (drift_edges.sql pads them with +inf), compared in
           -- place rather than filtered per row
           CASE WHEN v.num IS NULL THEN NULL ELSE
               (v.num > e.padded[1])::INT + (v.num > e.padded[2])::INT + (v.num > e.padded[3])::INT
             + (v.num > e.padded[4])::INT + (v.num > e.padded[5])::INT + (v.num > e.padded[6])::INT
             + (v.num > e.padded[7])::INT + (v.num > e.padded[8])::INT + (v.num > e.padded[9])::INT END AS bin
    FROM drift_values AS v JOIN drift_edges AS e ON e.signal = v.signal
), numeric_counts AS (
    SELECT signal, bin,
           count(*) FILTER (WHERE side = 'reference') AS a,
           count(*) FILTER (WHERE side = 'current') AS b
    FROM numeric_values
    GROUP BY signal, bin
), numeric_grid AS (
    SELECT e.signal, k.bin
    FROM drift_edges AS e, LATERAL (SELECT unnest(range(len(e.edges) + 1)) AS bin) AS k
), numeric_bins AS (
    SELECT g.signal, g.bin, false AS is_null, NULL::VARCHAR AS value, false AS is_other,
           coalesce(c.a, 0) AS a, coalesce(c.b, 0) AS b
    FROM numeric_grid AS g LEFT JOIN numeric_counts AS c ON c.signal = g.signal AND c.bin = g.bin
    UNION ALL
    SELECT signal, NULL, true, NULL, false, a, b FROM numeric_counts WHERE bin IS NULL
), categorical_counts AS (
    SELECT v.signal, v.cat AS value,
           count(*) FILTER (WHERE v.side = 'reference') AS a,
           count(*) FILTER (WHERE v.side = 'current') AS b
    FROM drift_values AS v ANTI JOIN drift_edges AS e ON e.signal = v.signal
    GROUP BY v.signal, v.cat
), ranked AS (
    SELECT signal, value, a, b,
           count(*) OVER (PARTITION BY signal) AS seen,
           row_number() OVER (PARTITION BY signal ORDER BY a DESC, value ASC NULLS LAST) AS rank
    FROM categorical_counts
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
