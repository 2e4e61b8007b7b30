-- reads: <reference>, <current>
-- creates: <view>
-- Every head's unknown-token signal (numeric): the share of a row's tokens that are the tokenizer's
-- unknown token (null for a row of no tokens), of both runs' scored rows.
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT true AS reference, unknown_tokens / nullif(tokens, 0) AS num FROM {reference}
UNION ALL
SELECT false, unknown_tokens / nullif(tokens, 0) FROM {current};
