-- reads: nothing
-- creates: drift_numeric_counts, drift_categorical_counts
-- Both runs' rows (a: reference, b: current) per bin of each numeric signal (bin null for null
-- values) and per value of each categorical signal (null its own value); drift_bins.sql makes the
-- bins of both.
CREATE OR REPLACE TEMP TABLE drift_numeric_counts (signal VARCHAR, bin BIGINT, a BIGINT, b BIGINT);
CREATE OR REPLACE TEMP TABLE drift_categorical_counts (signal VARCHAR, value VARCHAR, a BIGINT, b BIGINT);
