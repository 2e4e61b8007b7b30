-- reads: <source>
-- creates: nothing
-- Every head's length signals (numeric): tokens per row before any cut, and the share of its
-- tokens that are the tokenizer's unknown token (null for a row of no tokens).
INSERT INTO drift_values
SELECT $side, 'tokens', tokens, NULL FROM {source}
UNION ALL
SELECT $side, 'unknown_token_share', unknown_tokens / nullif(tokens, 0), NULL FROM {source};
