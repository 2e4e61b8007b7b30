-- reads: nothing
-- creates: drift_values
-- Every signal's value for every scored row of both runs, one row per (side, signal, row): `num`
-- for a numeric signal, `cat` for a categorical one (a null value is a null in its column).
CREATE OR REPLACE TEMP TABLE drift_values (side VARCHAR, signal VARCHAR, num DOUBLE, cat VARCHAR);
