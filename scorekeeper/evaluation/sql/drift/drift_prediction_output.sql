-- reads: <reference>, <current>
-- creates: <view>
-- One output's prediction of a regression run with several (numeric, `prediction:NAME`): the list
-- element at each run's own 1-based position of the output (<reference_index>, <current_index>).
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, prediction[{reference_index}] AS num FROM {reference}
UNION ALL
SELECT false, prediction[{current_index}] FROM {current};
