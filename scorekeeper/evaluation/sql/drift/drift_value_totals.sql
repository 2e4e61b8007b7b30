-- reads: drift_value_counts
-- creates: nothing
-- Each run's non-null values of the signal in drift_value_counts (m and n).
SELECT coalesce(sum(a) FILTER (WHERE num IS NOT NULL), 0), coalesce(sum(b) FILTER (WHERE num IS NOT NULL), 0)
FROM drift_value_counts;
