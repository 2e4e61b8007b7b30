-- reads: <reference>, <current>
-- creates: <view>
-- A slice column's values (categorical, as text) for every staged row of both runs (each run's
-- staged input and its own staged column holding the slice).
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, {reference_column}::VARCHAR AS cat FROM {reference}
UNION ALL
SELECT false, {current_column}::VARCHAR FROM {current};
