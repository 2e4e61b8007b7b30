-- reads: <source>
-- creates: nothing
-- A run's scored rows (m or n of the statistic).
SELECT count(*) FROM {source};
