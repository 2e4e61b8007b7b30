-- reads: truth
-- creates: truth_elements
-- One row per element of a list-valued truth (multi-label): the text its rule is decided on.
CREATE TEMP TABLE truth_elements AS
SELECT row_index, id, CAST(unnest(value) AS VARCHAR) AS raw_label
FROM truth
WHERE row_index IS NOT NULL;
