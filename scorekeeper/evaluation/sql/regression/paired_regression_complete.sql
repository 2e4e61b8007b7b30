-- reads: reg_paired, labels
-- creates: reg_paired_complete
-- The paired rows with both runs' predictions finite for every output ($outputs of them), per
-- output id: what the resampled tests read.
CREATE TEMP TABLE reg_paired_complete AS
SELECT p.row_index, l.label_id AS output_id, p.y, p.after, p.before
FROM reg_paired AS p JOIN labels AS l ON l.label_name = p.output
WHERE p.row_index IN (
    SELECT row_index FROM reg_paired WHERE isfinite(after) AND isfinite(before) GROUP BY row_index HAVING count(*) = $outputs
);
