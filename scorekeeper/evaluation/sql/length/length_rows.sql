-- reads: predictions
-- creates: length_rows
-- Each scored row's side of the window: over when its length before any cut (tokens = L + s)
-- exceeds $max_length, i.e. its L content tokens exceed the window W = max_length - s.
CREATE OR REPLACE TEMP TABLE length_rows AS
SELECT row_index, tokens > $max_length AS over
FROM predictions;
