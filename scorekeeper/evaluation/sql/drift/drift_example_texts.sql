-- reads: <staged>
-- creates: nothing
-- The representation signal's examples (representation.py): the text of each row asked for, by row_index.
SELECT row_index, "text" FROM {staged} WHERE row_index IN (SELECT unnest($rows));
