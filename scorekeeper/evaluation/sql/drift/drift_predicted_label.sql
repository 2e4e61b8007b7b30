-- reads: <reference>, <current>
-- creates: <view>
-- A single-label run's predicted label (categorical).
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, predicted_label AS cat FROM {reference}
UNION ALL
SELECT false, predicted_label FROM {current};
