-- reads: nothing
-- creates: cuts
-- The score thresholds of the coverage table ($thresholds), one row each.
CREATE OR REPLACE TEMP TABLE cuts AS SELECT unnest($thresholds::DOUBLE[]) AS threshold;
