-- reads: <reference>, <current>
-- creates: <view>
-- A single-label run's score signal (numeric): the predicted label's probability.
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, score AS num FROM {reference}
UNION ALL
SELECT false, score FROM {current};
