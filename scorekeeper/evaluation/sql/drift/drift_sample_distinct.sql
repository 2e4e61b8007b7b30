-- reads: <values>
-- creates: nothing
-- How many distinct values the first $sample values of a numeric signal hold (approximately), and
-- how many values that is: only chooses how the signal is counted (per value first when it has few,
-- drift.py), never what is counted.
SELECT approx_count_distinct(num), count(*)
FROM (SELECT num FROM {values} LIMIT $sample);
