-- reads: <reference>, <current>
-- creates: <view>
-- A one-output regression run's prediction (numeric).
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, prediction AS num FROM {reference}
UNION ALL
SELECT false, prediction FROM {current};
