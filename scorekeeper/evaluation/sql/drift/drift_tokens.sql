-- reads: <reference>, <current>
-- creates: <view>
-- Every head's length signal (numeric): tokens per row before any cut, of both runs' scored rows
-- (`reference` true for the reference run's). Each signal is a view of this shape, read by drift.py
-- one signal at a time, so no table of every signal's values is ever made.
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, tokens::DOUBLE AS num FROM {reference}
UNION ALL
SELECT false, tokens::DOUBLE FROM {current};
