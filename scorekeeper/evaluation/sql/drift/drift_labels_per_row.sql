-- reads: <reference>, <current>
-- creates: <view>
-- A multi-label run's labels predicted per row (numeric).
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, len(predicted_labels)::DOUBLE AS num FROM {reference}
UNION ALL
SELECT false, len(predicted_labels)::DOUBLE FROM {current};
