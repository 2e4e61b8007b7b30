-- reads: drift_buckets
-- creates: nothing
-- One numeric signal's rows per bin in each run, from its buckets (bin = bucket // $k; null stays
-- null). Only bins holding a row; drift_bins.sql adds the empty ones.
INSERT INTO drift_numeric_counts
SELECT $signal, bucket // $k::BIGINT AS bin, sum(a), sum(b)
FROM drift_buckets
GROUP BY bin;
