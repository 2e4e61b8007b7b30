-- reads: <values>
-- creates: drift_buckets
-- One numeric signal of many distinct values counted per bucket in each run (a: reference, b:
-- current; null values in bucket null; `low`, `high`: its smallest and largest value), in one pass over its values ($padded, $anchors, $scales, $k:
-- drift_bucket_macros.sql). Its bins are sums of buckets (bucket // $k), and the KS statistic is
-- bounded from them before any sort (drift_ks_bound.sql).
CREATE OR REPLACE TEMP TABLE drift_buckets AS
SELECT drift_bucket(num, bin, $anchors::DOUBLE[], $scales::DOUBLE[], $k::BIGINT) AS bucket,
       count(*) FILTER (WHERE reference) AS a,
       count(*) FILTER (WHERE NOT reference) AS b,
       min(num) AS low, max(num) AS high
FROM (SELECT reference, num, drift_bin(num, $padded::DOUBLE[]) AS bin FROM {values})
GROUP BY bucket;
