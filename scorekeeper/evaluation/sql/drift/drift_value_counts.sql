-- reads: <values>
-- creates: drift_value_counts
-- A numeric signal of few distinct values counted once per value in each run (a: reference, b:
-- current; null its own value): its deciles, bins and KS statistic are then read from this table.
CREATE OR REPLACE TEMP TABLE drift_value_counts AS
SELECT num, count(*) FILTER (WHERE reference) AS a, count(*) FILTER (WHERE NOT reference) AS b
FROM {values}
GROUP BY num;
