-- reads: drift_buckets
-- creates: nothing
-- The current run's non-null values of the signal in drift_buckets (n of the KS statistic).
SELECT coalesce(sum(b), 0) FROM drift_buckets WHERE bucket IS NOT NULL;
