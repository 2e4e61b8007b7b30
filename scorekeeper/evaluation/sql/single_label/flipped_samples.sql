-- reads: paired
-- creates: nothing
-- Up to $limit rows of one flip direction, the new prediction's most confident first.
SELECT row_index, id, true_name, before, after, score_before, score_after
FROM paired
WHERE right_before = $right_before AND right_after = NOT $right_before
ORDER BY score_after DESC, row_index
LIMIT $limit;
