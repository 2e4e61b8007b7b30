-- reads: drift_value_counts
-- creates: nothing
-- One numeric signal's rows per bin in each run (as drift_bucket_bins.sql), from its counts per value
-- (drift_bin: drift_bucket_macros.sql).
INSERT INTO drift_numeric_counts
SELECT $signal, drift_bin(num, $padded::DOUBLE[]) AS bin, sum(a), sum(b)
FROM drift_value_counts
GROUP BY bin;
